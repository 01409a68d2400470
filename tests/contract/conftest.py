"""The API contract suite's target: the emulator by default, the real control plane of ``make real-cluster``
with ``GANG_CONTRACT_BACKEND=real`` (as ``make test`` runs it), any cluster via ``GANG_CONTRACT_KUBECONFIG``.

Every test runs in its own fresh namespace, so the suite can run against a real (e.g. the
Debian-built 1.20) apiserver and asserts the same outcomes there (what only the emulator can do, such as container
logs a test writes, is tested outside this suite). Tests that need parts a bare apiserver lacks call
:func:`require_garbage_collector`, or :meth:`Cluster.add_user` (users with their own rules: the
emulator's, or RBAC and a client certificate on the real control plane; other clusters skip).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from gang_sim.apiserver.crds import bundled_crds
from gang_sim.apiserver.http.auth import Rule
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from gang_sim.testing.real import RealCluster

KUBECTL = str(Path(sys.executable).parent / "kubectl")
_PR_CRD = (
    Path(__file__).resolve().parents[2]
    / "gang-sim/src/gang_sim/apiserver/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"
)
_NAMESPACE_NUMBERS = itertools.count()


@dataclass
class Cluster:
    """One API server under test."""

    kubeconfig_path: Path
    harness: ClusterHarness | None = None
    has_garbage_collector: bool = False
    """A kube-controller-manager runs beside the apiserver (the emulator has its own collector)."""
    real: RealCluster | None = None
    """The real control plane this suite started (it can issue client certificates)."""
    _api: client.ApiClient | None = field(default=None, repr=False)
    _granted: list[str] = field(default_factory=list, repr=False)

    @property
    def is_emulator(self) -> bool:
        return self.harness is not None

    @property
    def api(self) -> client.ApiClient:
        if self._api is None:
            self._api = config.new_client_from_config(str(self.kubeconfig_path))
        return self._api

    def close(self) -> None:
        if self._granted:
            rbac = client.RbacAuthorizationV1Api(self.api)
            for name in self._granted:
                rbac.delete_cluster_role_binding(name)
                rbac.delete_cluster_role(name)
            self._granted.clear()
        if self._api is not None:
            self._api.close()
            self._api = None

    @property
    def can_restart_apiserver(self) -> bool:
        return self.harness is not None or self.real is not None

    def restart_apiserver(self, down_seconds: float) -> None:
        """Kill the API server, start it again ``down_seconds`` later; return once it serves."""
        if self.harness is not None:
            self.harness.restart_api_server(down_seconds)
        elif self.real is not None:
            self.real.restart_apiserver(down_seconds)
        else:
            raise RuntimeError("this cluster is not started by the suite: it cannot be restarted")

    def probe(self) -> str | None:
        """None when the API server answers ``/version`` (any status), else why the request failed."""
        try:
            self.api.rest_client.pool_manager.request(
                "GET", self.api.configuration.host + "/version", timeout=2.0, retries=False
            )
        except Exception as error:  # urllib3 wraps the socket error; its text names it
            return repr(error)
        return None

    def add_user(self, user: str, rules: list[Rule]) -> Path:
        """A kubeconfig of a new user allowed exactly ``rules`` (cluster-wide) and what every
        authenticated user may do (upstream's ``system:basic-user``, e.g. SelfSubjectAccessReviews).

        Emulator: its per-user rules and a token. Real control plane: a ClusterRole and a
        ClusterRoleBinding for the user, who authenticates with a client certificate; returns once the
        authorizer applies the binding. Any other cluster: the test is skipped."""
        if self.harness is not None:
            return self.harness.add_user(user, rules)[1]
        if self.real is None:
            pytest.skip("users with their own rules need the emulator or the real control plane this suite starts")
        name = f"contract-{os.getpid()}-{user}"
        rbac = client.RbacAuthorizationV1Api(self.api)
        role_rules = [
            {"apiGroups": list(r.groups), "resources": list(r.resources), "verbs": list(r.verbs)}
            | ({"resourceNames": list(r.names)} if r.names else {})
            for r in rules
        ]
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": role_rules})
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }
        )
        self._granted.append(name)
        reviews = client.AuthorizationV1Api(self.api)
        for rule in rules:
            attributes = {"verb": rule.verbs[0], "group": rule.groups[0], "resource": rule.resources[0]}
            if rule.names:  # a rule of named objects allows nothing without the name
                attributes["name"] = rule.names[0]
            review = {"spec": {"user": user, "resourceAttributes": attributes}}
            eventually(
                lambda review=review: reviews.create_subject_access_review(review).status.allowed,
                timeout=10,
                what=f"the RBAC authorizer applies {name}",
            )
        return self.real.kubeconfig_for(user)

    def kubectl(
        self, *args: str, timeout: float = 30.0, input_text: str | None = None, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl as the admin, or as the user of ``kubeconfig``."""
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig or self.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            check=False,
        )

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "application/json",
        token: str | None = None,
    ) -> tuple[int, Any]:
        """A request with an exact body (e.g. malformed JSON), returning (status, decoded body)."""
        configuration = self.api.configuration
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        settings = configuration.auth_settings().get("BearerToken") or {}
        authorization = settings.get("value") if token is None else f"Bearer {token}"
        if authorization:
            headers["Authorization"] = authorization
        response = self.api.rest_client.pool_manager.request(
            method,
            configuration.host + path,
            body=body,
            headers=headers,
            timeout=10.0,
            preload_content=True,
        )
        text = response.data.decode()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text


def require_version(cluster: Cluster, minor: int, feature: str) -> None:
    """Skip on servers older than 1.<minor> (e.g. the Debian-built 1.20), which lack ``feature``."""
    version = client.VersionApi(cluster.api).get_code()
    if int("".join(ch for ch in version.minor if ch.isdigit())) < minor:
        pytest.skip(f"{feature} needs Kubernetes >= 1.{minor} (server is {version.git_version})")


def require_garbage_collector(cluster: Cluster) -> None:
    if not (cluster.is_emulator or cluster.has_garbage_collector):
        pytest.skip("a bare apiserver runs no garbage collector")


@pytest.fixture(scope="session")
def real_control_plane() -> Iterator[RealCluster]:
    """The real control plane, started once for the session (no Kueue, no autoscaler)."""
    with RealCluster("small", kueue=False, autoscaler=False) as real:
        # The upstream CRDs the emulator serves that the cluster lacks (Kueue's without their
        # conversion webhook: no Kueue runs).
        served = {crd["metadata"]["name"] for crd in real.get("customresourcedefinitions")["items"]}
        missing = [crd for crd in bundled_crds() if crd["metadata"]["name"] not in served]
        if missing:
            real.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(missing, sort_keys=False))
        real.wait_established()
        yield real


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if os.environ.get("GANG_CONTRACT_BACKEND") == "real":
        control_plane: RealCluster = request.getfixturevalue("real_control_plane")
        real = Cluster(control_plane.kubeconfig_path, has_garbage_collector=True, real=control_plane)
        yield real
        real.close()
        return
    target = os.environ.get("GANG_CONTRACT_KUBECONFIG")
    if target:
        real = Cluster(Path(target))
        if real.kubectl("get", "crd", "provisioningrequests.autoscaling.x-k8s.io").returncode != 0:
            real.kubectl("create", "--validate=false", "-f", str(_PR_CRD), timeout=60)
        yield real
        real.close()
        return
    with ClusterHarness(seed=0) as harness:
        emulated = Cluster(harness.kubeconfig_path, harness)
        yield emulated
        emulated.close()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test (deleted afterwards)."""
    name = f"contract-{os.getpid()}-{next(_NAMESPACE_NUMBERS)}"
    core = client.CoreV1Api(cluster.api)
    core.create_namespace({"metadata": {"name": name}})
    if not cluster.is_emulator and cluster.has_garbage_collector:
        # kube-controller-manager's serviceaccounts controller creates a namespace's "default" account
        # a moment after the namespace; until then the ServiceAccount admission plugin refuses pods
        # (403 "serviceaccount \"default\" not found", plugin/pkg/admission/serviceaccount/admission.go).
        eventually(
            lambda: any(
                account.metadata.name == "default" for account in core.list_namespaced_service_account(name).items
            ),
            timeout=60,
            what=f"the default service account of {name}",
        )
    yield name
    core.delete_namespace(name)


def status_of(error: client.ApiException) -> dict[str, Any]:
    """The ``Status`` body of a client error."""
    decoded: dict[str, Any] = json.loads(error.body)
    return decoded
