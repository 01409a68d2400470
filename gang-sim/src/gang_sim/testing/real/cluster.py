"""A real Kubernetes control plane on loopback for tests, benchmarks and ``gang-sim real``.

::

    with RealCluster("small") as cluster:          # the scenario names the same pools as gang-sim's
        subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), "get", "nodes"])

Started in the order envtest and kwokctl's binary runtime use (controller-runtime
``pkg/internal/testing/controlplane``; kwok ``pkg/kwokctl/runtime/binary/cluster.go``): etcd
(``--unsafe-no-fsync``), kube-apiserver (RBAC, a client CA with an admin in ``system:masters``, a
service account signer), kube-controller-manager (Job controller, garbage collector, service account
tokens), kube-scheduler, kwok (fake kubelets for nodes annotated ``kwok.x-k8s.io/node: fake``); the
scenario's initial nodes; Kueue (:mod:`.kueue`); the cluster-autoscaler with its kwok cloud provider
when built (:mod:`.autoscaler`); the scenario's ``objects``. Every component runs on free ports of
127.0.0.1 with its state in one temporary directory; :meth:`RealCluster.stop` kills what was started
(by PID) and removes the directory, also when a start fails half-way; etcd keeps the objects through
:meth:`RealCluster.restart_apiserver`. Each component's flags and files are in its own module.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from gang_sim.apiserver.tls import CertificateAuthority
from gang_sim.testing.real import autoscaler, feature_gates, kubeconfigs, kueue, nodes, stages
from gang_sim.testing.real.binaries import Binaries, find
from gang_sim.testing.real.certificates import cluster_authority, service_account_signer
from gang_sim.testing.real.processes import Component, free_port
from gang_sim.world.scenario import Scenario, load_scenario

START_TIMEOUT_SECONDS = 120.0
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
_APISERVER_HOSTS = ("127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


class RealCluster:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Kueue and (when built) the
    cluster-autoscaler, on loopback, for one scenario. ``kubeconfig_path`` (admin, client
    certificate) is written once the apiserver is healthy; ``url`` is the apiserver's.
    ``kueue=False`` leaves Kueue out (faster, for tests that need none); ``workload_api=False``
    leaves the Workload / PodGroup API off; the scenario's ``featureGates`` are on (:mod:`.feature_gates`).
    """

    def __init__(
        self,
        scenario: Scenario | str = "small",
        *,
        binaries: Binaries | None = None,
        kueue: bool = True,
        autoscaler: bool | None = None,
        workload_api: bool = True,
        kubeconfig_path: str | Path | None = None,
        start_timeout: float = START_TIMEOUT_SECONDS,
    ) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        self.binaries = binaries or find()
        self.with_kueue, self.with_workload_api, self.gates = kueue, workload_api, self.scenario.feature_gates
        self.with_autoscaler = self.binaries.has_cluster_autoscaler if autoscaler is None else autoscaler
        self._requested_kubeconfig = Path(kubeconfig_path) if kubeconfig_path is not None else None
        self._start_timeout = start_timeout
        self.components: list[Component] = []
        self.directory = Path()
        self.kubeconfig_path = Path()
        self.url = ""
        self._authority: CertificateAuthority | None = None
        self._context: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until each is healthy; on any failure stop what started."""
        self.directory = Path(tempfile.mkdtemp(prefix="gang-real-cluster-"))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components in reverse start order and remove the state directory (idempotent)."""
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        if self.directory.name and self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = Path()

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """SIGKILL the kube-apiserver, start it again ``down_seconds`` later, return once it is ready."""
        apiserver, ready = self._named("kube-apiserver"), f"{self.url}/readyz"
        apiserver.restart(down_seconds, ready, self._context, timeout=self._start_timeout)

    def pids(self) -> dict[str, int]:
        """The running components' process ids, by name (for tests that kill one)."""
        return {component.name: component.pid for component in self.components if component.pid is not None}

    # -- clients -----------------------------------------------------------------------------------

    def kubectl(self, *arguments: str, input_text: str | None = None, check: bool = True) -> str:
        """Run the built kubectl against this cluster; its standard output."""
        result = subprocess.run(
            [str(self.binaries.path("kubectl")), "--kubeconfig", str(self.kubeconfig_path), *arguments],
            input=input_text,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(arguments)} failed: {result.stderr.strip()}")
        return result.stdout

    def apply(self, documents: Sequence[dict[str, Any]]) -> None:
        """Server-side apply ``documents`` (force: this harness owns what it installs)."""
        if documents:
            self.kubectl(
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=gang-real-cluster",
                "-f",
                "-",
                input_text=yaml.safe_dump_all(list(documents), sort_keys=False),
            )

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig file for ``user`` in ``groups`` (a client certificate of this cluster's CA); it may
        do what RBAC grants that user and its groups."""
        if self._authority is None:
            raise RuntimeError("the cluster is not started")
        pair = self._authority.client(user, tuple(groups))
        text = yaml.safe_dump(kubeconfigs.document(self.url, self._authority.certificate_pem, user, pair))
        path = self._file(f"users/{user}.kubeconfig", text)
        path.chmod(0o600)
        return path

    def get(self, resource: str, name: str = "", namespace: str | None = None) -> Any:
        """``kubectl get -o json`` as a dict (a List when ``name`` is empty)."""
        arguments = ["get", resource, *([name] if name else []), "-o", "json"]
        arguments += ["-n", namespace] if namespace else (["-A"] if not name else [])
        return json.loads(self.kubectl(*arguments))

    # -- start sequence ----------------------------------------------------------------------------

    def _file(self, name: str, content: bytes | str) -> Path:
        path = self.directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if name.endswith(".key"):
            path.chmod(0o600)
        return path

    def _component(self, name: str, command: list[str], environment: dict[str, str] | None = None) -> Component:
        component = Component(name, command, self.directory / f"{name}.log", environment or {})
        component.start()
        self.components.append(component)
        return component

    def _start(self) -> None:
        authority = self._authority = cluster_authority()
        ca_path = self._file("pki/ca.crt", authority.certificate_pem)
        context = self._context = ssl.create_default_context(cafile=str(ca_path))
        self._start_etcd()
        self._start_apiserver(authority, ca_path, context)
        admin_kubeconfig = self._write_kubeconfig(authority)
        self._start_controllers(authority, ca_path, admin_kubeconfig)
        initial = nodes.initial_nodes(self.scenario)
        self.apply(initial)
        self._wait_for_ready_nodes(len(initial), self._named("kwok"))
        # The ProvisioningRequest CRD of the autoscaler API module: Kueue's admission check and the
        # cluster-autoscaler both need it before they start.
        self.kubectl("create", "-f", str(self.binaries.manifests / "autoscaling.x-k8s.io_provisioningrequests.yaml"))
        self.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/provisioningrequests.autoscaling.x-k8s.io"
        )
        if self.with_kueue:
            self._start_kueue(authority, admin_kubeconfig, context)
        if self.with_autoscaler:
            self._start_autoscaler(admin_kubeconfig)
        self.apply([dict(manifest) for manifest in self.scenario.objects])

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self._etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._component(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls={self._etcd_url}",
                f"--advertise-client-urls={self._etcd_url}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
        )
        etcd.wait_healthy(f"{self._etcd_url}/health", None, timeout=self._start_timeout)

    def _start_apiserver(self, authority: CertificateAuthority, ca_path: Path, context: ssl.SSLContext) -> None:
        serving_cert, serving_key = authority.serving("kube-apiserver", _APISERVER_HOSTS).write(
            self.directory / "pki", "apiserver"
        )
        signer_private, signer_public = service_account_signer()
        self._service_account_key = self._file("pki/service-account.key", signer_private)
        service_account_public = self._file("pki/service-account.pub", signer_public)
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        apiserver = self._component(
            "kube-apiserver",
            [
                str(self.binaries.path("kube-apiserver")),
                f"--etcd-servers={self._etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--secure-port={port}",
                f"--cert-dir={self.directory / 'pki'}",
                f"--tls-cert-file={serving_cert}",
                f"--tls-private-key-file={serving_key}",
                f"--client-ca-file={ca_path}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={service_account_public}",
                f"--service-account-signing-key-file={self._service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                "--max-requests-inflight=2000",
                "--max-mutating-requests-inflight=1000",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--v=1",
                *feature_gates.workload_api_flags(self.with_workload_api, apiserver=True, gates=self.gates),
            ],
        )
        apiserver.wait_healthy(f"{self.url}/readyz", context, timeout=self._start_timeout)

    def _write_kubeconfig(self, authority: CertificateAuthority) -> Path:
        pair = authority.client("gang-admin", ("system:masters",))
        admin = kubeconfigs.document(self.url, authority.certificate_pem, "gang-admin", pair)
        internal = self._file("admin.kubeconfig", yaml.safe_dump(admin, sort_keys=False))
        internal.chmod(0o600)
        if self._requested_kubeconfig is not None:
            self._requested_kubeconfig.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(internal, self._requested_kubeconfig)
            self._requested_kubeconfig.chmod(0o600)
            self.kubeconfig_path = self._requested_kubeconfig
        else:
            self.kubeconfig_path = internal
        return internal

    def _start_controllers(self, authority: CertificateAuthority, ca_path: Path, admin_kubeconfig: Path) -> None:
        common = [
            f"--kubeconfig={admin_kubeconfig}",
            f"--authentication-kubeconfig={admin_kubeconfig}",
            f"--authorization-kubeconfig={admin_kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        waits = []
        for name, extra in (
            (
                "kube-controller-manager",
                [
                    f"--service-account-private-key-file={self._service_account_key}",
                    f"--root-ca-file={ca_path}",
                    "--use-service-account-credentials=false",
                    "--controllers=*,-node-ipam-controller",
                    "--concurrent-gc-syncs=20",
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                ],
            ),
            ("kube-scheduler", ["--kube-api-qps", "200", "--kube-api-burst", "400"]),
        ):
            port = free_port()
            certificate, key = authority.serving(name).write(self.directory / "pki", name)
            component = self._component(
                name,
                [
                    str(self.binaries.path(name)),
                    *common,
                    f"--secure-port={port}",
                    f"--tls-cert-file={certificate}",
                    f"--tls-private-key-file={key}",
                    *extra,
                    *feature_gates.workload_api_flags(self.with_workload_api, apiserver=False, gates=self.gates),
                ],
            )
            waits.append((component, f"https://127.0.0.1:{port}/healthz"))
        kwok_configuration = stages.write_configuration(self.binaries.manifests, self.directory / "kwok.yaml")
        kwok = self._component(
            "kwok",
            [
                str(self.binaries.path("kwok")),
                f"--kubeconfig={admin_kubeconfig}",
                f"--config={kwok_configuration}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={nodes.KWOK_MANAGED_SELECTOR}",
                f"--server-address={f'127.0.0.1:{free_port()}'}",
                "--node-ip=10.244.0.1",
                "--cidr=10.244.0.0/16",
            ],
        )
        for component, url in waits:
            component.wait_healthy(url, self._context, timeout=self._start_timeout)
        if not kwok.is_running():
            raise kwok.failure("exited during start")

    def _start_kueue(self, authority: CertificateAuthority, admin_kubeconfig: Path, context: ssl.SSLContext) -> None:
        manifests = self.binaries.manifests
        webhook_port, health_port = free_port(), free_port()
        base_url = f"https://127.0.0.1:{webhook_port}"
        serving = authority.serving("kueue-webhook")
        serving.write(self._certificate_directory("kueue-webhook"), "tls")
        kueue.ensure_metrics_certificate(serving)
        settings = self.scenario.kueue
        configuration = kueue.configuration(
            webhook_port=webhook_port,
            health_port=health_port,
            certificate_directory=self.directory / "kueue-webhook",
            wait_for_pods_ready_seconds=settings.wait_for_pods_ready_timeout_seconds,
        )
        configuration_path = self._file("kueue.yaml", yaml.safe_dump(configuration, sort_keys=False))
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kueue.NAMESPACE}}])
        definitions = kueue.custom_resource_definitions(manifests, base_url, authority.certificate_pem)
        # Created, not applied: server-side apply of Kueue's large schemas takes the apiserver longer.
        self.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(definitions, sort_keys=False))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        process = self._component(
            "kueue",
            [
                str(self.binaries.path("kueue")),
                f"--config={configuration_path}",
                "--feature-gates=VisibilityOnDemand=false",
                "--zap-log-level=info",
            ],
            {"KUBECONFIG": str(admin_kubeconfig)},
        )
        process.wait_healthy(f"http://127.0.0.1:{health_port}/readyz", None, timeout=self._start_timeout)
        self.apply(kueue.webhook_configurations(manifests, base_url, authority.certificate_pem))

    def _certificate_directory(self, name: str) -> Path:
        directory = self.directory / name
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def _start_autoscaler(self, admin_kubeconfig: Path) -> None:
        namespace = autoscaler.NAMESPACE
        self.apply(autoscaler.configuration_objects(self.scenario))
        process = self._component(
            "cluster-autoscaler",
            autoscaler.command(self.binaries.path(autoscaler.BINARY), admin_kubeconfig, self.scenario, free_port()),
            {"KWOK_PROVIDER_MODE": "local", "KUBECONFIG": str(admin_kubeconfig), "POD_NAMESPACE": namespace},
        )
        if not process.is_running():
            raise process.failure("exited during start")

    def _named(self, name: str) -> Component:
        return next(component for component in self.components if component.name == name)

    def _wait_for_ready_nodes(self, count: int, component: Component) -> None:
        """Until ``count`` nodes are Ready (kwok's node-initialize stage), or ``component`` exits."""
        deadline = time.monotonic() + self._start_timeout
        while True:
            if not component.is_running():
                raise component.failure("exited during start")
            statuses = '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'
            ready = self.kubectl("get", "nodes", "-o", f"jsonpath={statuses}").split()
            if ready.count("True") >= count:
                return
            if time.monotonic() > deadline:
                raise component.failure(f"made {ready.count('True')} of the scenario's {count} initial nodes Ready")
            time.sleep(0.5)
