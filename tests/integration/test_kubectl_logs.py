"""kubectl 1.37 reading the emulator's container logs: waiting, the whole log, ``--tail``, ``--since``,
``--previous``, ``--timestamps`` and ``-f`` until the container ends.

Emulator-only, so not in the contract suite (``tests/contract``), which runs against the real control
plane as well: the test writes the running container's log through the emulator's store, and kwok's
fake kubelet on the real tier serves no log lines a test can write (docs/fidelity.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from gang_sim.testing import ClusterHarness
from tests.builders import pod
from tests.contract.conftest import Cluster


@pytest.fixture
def emulator() -> Iterator[Cluster]:
    with ClusterHarness(seed=0) as harness:
        emulated = Cluster(harness.kubeconfig_path, harness)
        client.CoreV1Api(emulated.api).create_namespace({"metadata": {"name": "logs"}})
        yield emulated
        emulated.close()


def test_logs_of_a_running_container(emulator: Cluster) -> None:
    harness, namespace = emulator.harness, "logs"
    assert harness is not None
    client.CoreV1Api(emulator.api).create_namespaced_pod(namespace, pod("p1"))
    waiting = emulator.kubectl("logs", "p1", "-n", namespace)
    assert waiting.returncode != 0 and "waiting to start" in waiting.stderr
    harness.run(lambda: harness.store.logs.append(namespace, "p1", "main", "one\ntwo\nthree\n"))
    assert emulator.kubectl("logs", "p1", "-n", namespace).stdout == "one\ntwo\nthree\n"
    assert emulator.kubectl("logs", "p1", "-n", namespace, "--tail=1").stdout == "three\n"
    assert emulator.kubectl("logs", "p1", "-n", namespace, "--since=1h").stdout == "one\ntwo\nthree\n"
    previous = emulator.kubectl("logs", "p1", "-n", namespace, "--previous")
    assert previous.returncode != 0 and 'previous terminated container "main"' in previous.stderr
    stamped = emulator.kubectl("logs", "p1", "-n", namespace, "--timestamps", "--tail=1").stdout
    assert stamped.endswith("Z three\n") and stamped[:4].isdigit()
    harness.run(lambda: harness.store.logs.close(namespace, "p1", "main"))
    followed = emulator.kubectl("logs", "-f", "p1", "-n", namespace)
    assert followed.returncode == 0 and followed.stdout == "one\ntwo\nthree\n"
