"""A real Kubernetes control plane on loopback for tests, benchmarks and ``gang-sim real``.

::

    with RealCluster("small") as cluster:          # the scenario names the same pools as gang-sim's
        subprocess.run(["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), "get", "nodes"])

Started in the order envtest and kwokctl's binary runtime use (controller-runtime
``pkg/internal/testing/controlplane``; kwok ``pkg/kwokctl/runtime/binary/cluster.go``): etcd
(:mod:`.etcd`), kube-apiserver (:mod:`.apiserver`), kube-controller-manager and kube-scheduler
(:mod:`.controllers`), kwok (:mod:`.kwok`, fake kubelets for nodes annotated
``kwok.x-k8s.io/node: fake``); the scenario's initial nodes; Kueue (:mod:`.kueue`); the
cluster-autoscaler with its kwok cloud provider (:mod:`.autoscaler`); the scenario's ``objects``.
Each component's flags and files are in its own module, and so are the kubeconfigs of its users
(:mod:`.kubeconfigs`) and the kubectl it installs through (:mod:`.kubectl`); this one orders them
and waits for each.
Everything a cluster owns - its directory, ports, CA - is its own (:mod:`.workspace`), so several run
at once in one process. :meth:`RealCluster.stop` kills what was started (by PID) and removes the
directory, also when a start fails half-way; etcd keeps the objects through
:meth:`RealCluster.restart_apiserver`.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gang_sim.testing.real import apiserver, autoscaler, controllers, etcd, kubeconfigs, kueue, kwok, nodes
from gang_sim.testing.real.binaries import Binaries, find
from gang_sim.testing.real.certificates import cluster_authority
from gang_sim.testing.real.kubectl import Kubectl
from gang_sim.testing.real.processes import Component, Launch
from gang_sim.testing.real.workspace import Workspace
from gang_sim.testing.started import Started
from gang_sim.world.scenario import Scenario, load_scenario

START_TIMEOUT_SECONDS = 120.0
_ADMIN = "gang-admin"


class RealCluster(Started):
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Kueue and the
    cluster-autoscaler, on loopback, for one scenario. ``kubeconfig_path`` (admin, client
    certificate) is written once the apiserver is healthy; ``url`` is the apiserver's.
    ``kueue=False`` leaves Kueue out and ``autoscaler=False`` the autoscaler (faster, for tests that
    need neither); ``workload_api=False`` leaves the Workload / PodGroup API off; the scenario's
    ``featureGates`` are on in the apiserver, the scheduler and the controller-manager (:mod:`.feature_gates`).
    """

    def __init__(
        self,
        scenario: Scenario | str = "small",
        *,
        binaries: Binaries | None = None,
        kueue: bool = True,
        autoscaler: bool = True,
        workload_api: bool = True,
        kubeconfig_path: str | Path | None = None,
        start_timeout: float = START_TIMEOUT_SECONDS,
    ) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        self.binaries = binaries or find()
        self.with_kueue, self.with_autoscaler, self.with_workload_api = kueue, autoscaler, workload_api
        self._requested_kubeconfig = Path(kubeconfig_path) if kubeconfig_path is not None else None
        self._start_timeout = start_timeout
        self.components: list[Component] = []
        self.directory = Path()
        self.kubeconfig_path = Path()
        self.url = ""
        self._workspace: Workspace | None = None
        self._context: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every component and wait until each is healthy; on any failure stop what started."""
        self.directory = Path(tempfile.mkdtemp(prefix="gang-real-cluster-"))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components in reverse start order, free the ports and remove the state directory
        (idempotent)."""
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        if self._workspace is not None:
            self._workspace.ports.release()
            self._workspace = None
        if self.directory.name and self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = Path()

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """SIGKILL the kube-apiserver, start it again ``down_seconds`` later, return once it is ready
        (on the same port: it stays held meanwhile)."""
        apiserver_process, ready = self._named("kube-apiserver"), f"{self.url}/readyz"
        apiserver_process.restart(down_seconds, ready, self._context, timeout=self._start_timeout)

    def pids(self) -> dict[str, int]:
        """The running components' process ids, by name (for tests that kill one)."""
        return {component.name: component.pid for component in self.components if component.pid is not None}

    @property
    def ports(self) -> tuple[int, ...]:
        """The loopback ports held for this cluster's components while it runs."""
        return () if self._workspace is None else self._workspace.ports.held

    # -- clients -----------------------------------------------------------------------------------

    def kubectl(self, *arguments: str, input_text: str | None = None, check: bool = True) -> str:
        """Run the built kubectl against this cluster (:meth:`.kubectl.Kubectl.run`); its standard output."""
        return self._kubectl.run(*arguments, input_text=input_text, check=check)

    def apply(self, documents: Sequence[dict[str, Any]]) -> None:
        """Server-side apply ``documents`` (force: this harness owns what it installs)."""
        self._kubectl.apply(documents)

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig file for ``user`` in ``groups`` (a client certificate of this cluster's CA); it may
        do what RBAC grants that user and its groups."""
        if self._workspace is None:
            raise RuntimeError("the cluster is not started")
        return kubeconfigs.write(self._workspace, self.url, user, tuple(groups), f"users/{user}.kubeconfig")

    def wait_established(self, names: Sequence[str] = (), timeout: float = 60.0) -> None:
        """Until the CustomResourceDefinitions ``names`` (all of them when empty) exist and are Established
        (:meth:`.kubectl.Kubectl.wait_established`)."""
        self._kubectl.wait_established(names, timeout)

    def get(self, resource: str, name: str = "", namespace: str | None = None) -> Any:
        """``kubectl get -o json`` as a dict (a List when ``name`` is empty)."""
        return self._kubectl.get(resource, name, namespace)

    @property
    def _kubectl(self) -> Kubectl:
        return Kubectl(self.binaries.path("kubectl"), self.kubeconfig_path, self.directory / "kubectl-cache")

    # -- start sequence ----------------------------------------------------------------------------

    def _start(self) -> None:
        workspace = self._workspace = Workspace(self.directory, self.binaries, cluster_authority())
        self._context = ssl.create_default_context(cafile=str(workspace.ca_path))
        admin, fake_kubelets = self._start_control_plane(workspace)
        initial = nodes.initial_nodes(self.scenario)
        self.apply(initial)
        self._wait_for_ready_nodes(len(initial), fake_kubelets)
        # The ProvisioningRequest CRD of the autoscaler API module: Kueue's admission check and the
        # cluster-autoscaler both need it before they start.
        self.kubectl("create", "-f", str(self.binaries.manifests / "autoscaling.x-k8s.io_provisioningrequests.yaml"))
        self.wait_established(["provisioningrequests.autoscaling.x-k8s.io"])
        if self.with_kueue:
            self._start_kueue(workspace, admin)
        if self.with_autoscaler:
            self.apply(autoscaler.configuration_objects(self.scenario))
            self._run(autoscaler.launch(workspace, admin, self.scenario))
        self.apply([dict(manifest) for manifest in self.scenario.objects])

    def _start_control_plane(self, workspace: Workspace) -> tuple[Path, Component]:
        """etcd, the apiserver, then the controller-manager, scheduler and kwok side by side; the admin
        kubeconfig and kwok's process."""
        store = etcd.launch(workspace)
        self._run(store)
        gates = self.scenario.feature_gates
        server = apiserver.launch(workspace, store.url, workload_api=self.with_workload_api, gates=gates)
        self._run(server)
        self.url = server.url
        admin = self._write_admin_kubeconfig(workspace)
        launches = [
            *controllers.launches(workspace, admin, workload_api=self.with_workload_api, gates=gates),
            kwok.launch(workspace, admin),
        ]
        started = [(self._begin(launch), launch) for launch in launches]
        for component, launch in started:
            self._await(component, launch)
        return admin, self._named("kwok")

    def _start_kueue(self, workspace: Workspace, admin: Path) -> None:
        """Kueue's CRDs (converting through its webhook), Kueue, then its webhook configurations."""
        manifests, ca_pem = self.binaries.manifests, workspace.authority.certificate_pem
        launch = kueue.launch(
            workspace, admin, wait_for_pods_ready_seconds=self.scenario.kueue.wait_for_pods_ready_timeout_seconds
        )
        self.apply([kueue.namespace()])
        definitions = kueue.custom_resource_definitions(manifests, launch.url, ca_pem)
        # Created, not applied: server-side apply of Kueue's large schemas takes the apiserver longer.
        self.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(definitions, sort_keys=False))
        self.wait_established([definition["metadata"]["name"] for definition in definitions])
        self._run(launch)
        self.apply(kueue.webhook_configurations(manifests, launch.url, ca_pem))

    def _write_admin_kubeconfig(self, workspace: Workspace) -> Path:
        """The admin kubeconfig the components use; ``kubeconfig_path`` is it, or its copy where asked."""
        internal = kubeconfigs.write(workspace, self.url, _ADMIN, ("system:masters",), workspace.admin_kubeconfig.name)
        requested = self._requested_kubeconfig
        self.kubeconfig_path = internal if requested is None else kubeconfigs.copy_to(internal, requested)
        return internal

    def _begin(self, launch: Launch) -> Component:
        component = Component(launch.name, launch.command, self.directory / f"{launch.name}.log", launch.environment)
        component.start()
        self.components.append(component)
        return component

    def _await(self, component: Component, launch: Launch) -> None:
        """Until ``launch.health_url`` answers 200, or - without one - only that it still runs."""
        if launch.health_url is not None:
            component.wait_healthy(launch.health_url, self._context, timeout=self._start_timeout)
        elif not component.is_running():
            raise component.failure("exited during start")

    def _run(self, launch: Launch) -> None:
        self._await(self._begin(launch), launch)

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
