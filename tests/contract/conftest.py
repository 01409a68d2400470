"""The API contract suite's target: the emulator by default, any cluster via ``GANG_CONTRACT_KUBECONFIG``.

Every test runs in its own fresh namespace, so the suite can run against a real (e.g. the
Debian-built 1.20) apiserver and asserts the same outcomes there. Tests that need parts a bare
apiserver lacks (a garbage collector, a kubelet for logs, per-user rules) call
:func:`require_emulator`.
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
from kubernetes import client, config

from gang_sim.testing import ClusterHarness

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
    _api: client.ApiClient | None = field(default=None, repr=False)

    @property
    def is_emulator(self) -> bool:
        return self.harness is not None

    @property
    def api(self) -> client.ApiClient:
        if self._api is None:
            self._api = config.new_client_from_config(str(self.kubeconfig_path))
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def kubectl(
        self, *args: str, timeout: float = 30.0, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig_path), *args],
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


def require_emulator(cluster: Cluster, why: str) -> None:
    if not cluster.is_emulator:
        pytest.skip(f"needs the emulator: {why}")


def require_version(cluster: Cluster, minor: int, feature: str) -> None:
    """Skip on servers older than 1.<minor> (e.g. the Debian-built 1.20), which lack ``feature``."""
    version = client.VersionApi(cluster.api).get_code()
    if int("".join(ch for ch in version.minor if ch.isdigit())) < minor:
        pytest.skip(f"{feature} needs Kubernetes >= 1.{minor} (server is {version.git_version})")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
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
    yield name
    core.delete_namespace(name)


def status_of(error: client.ApiException) -> dict[str, Any]:
    """The ``Status`` body of a client error."""
    decoded: dict[str, Any] = json.loads(error.body)
    return decoded
