"""Differential fidelity: the same DAG on ``gang-sim`` and on the real control plane, compared.

Each scenario runs one gang through ``dag.test()`` first on ``gang-sim`` (the same scenario file,
at real time: every delay is the same real seconds) and then on the real stack (kube-apiserver,
kube-scheduler, controller-manager, kwok, Kueue 0.17, the cluster-autoscaler's kwok provider),
recording ProvisioningRequests, Workloads and pods from watches on both. :mod:`tests.real.sequences`
reduces the recordings to sequences (conditions per type, the milestones upstream orders,
admission-check states, pod phases, the ``PodScheduled`` condition, gate removals against bindings)
and the test compares them.

Every difference that remains is listed in :data:`tests.real.explained.KNOWN_DIFFERENCES` with the
sequences each side may show and the reason it is harmless (docs/fidelity.md carries the same
table). A difference not listed fails, and so does a listed one that always occurs but did not.

Both clusters start every scenario with the same GPU nodes, whatever ran before in the session:
gang-sim starts with as many GPU nodes as the real cluster has when this module starts (earlier
tests may have grown its pool), and the scenario's hour of scale-down delay keeps every node for the
module on both. Whether the autoscaler answers ``CapacityIsFound`` (the nodes are there) or
``CapacityIsProvisioned`` (it scaled up) therefore agrees; the first compared sequence of each
scenario is that node count. The counts of matched sequences, in all and per scenario, are written to
the terminal at the end.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gang_sim.world.cloud import POOL_LABEL
from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod
from tests.real import explained, sequences, tally
from tests.real.backends import RealBackend, airflow_connection, sim_backend, wait_for
from tests.real.conftest import leftovers
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(900)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
RECORDED = (
    "autoscaling.x-k8s.io/v1/provisioningrequests",
    "kueue.x-k8s.io/v1beta2/workloads",
    "scheduling.k8s.io/v1beta1/podgroups",
    "v1/pods",
)


@dataclass(frozen=True)
class Scenario:
    """One gang: the operator's arguments beyond the common ones (one GPU, one CPU, 5 s of run, deferrable)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


SCENARIOS = (
    Scenario(
        "provisioning request, best-effort-atomic, granted",
        {"size": 2, "reservation": "provisioning_request", "provisioning_class": ATOMIC},
    ),
    Scenario(
        "provisioning request beyond the pool: CapacityIsNotFound",
        {
            "size": 9,
            "reservation": "provisioning_request",
            "provisioning_class": ATOMIC,
            "reservation_timeout": timedelta(seconds=30),
        },
    ),
    Scenario("kueue quota admission", {"size": 2, "reservation": "kueue", "kueue_queue": "team"}),
    Scenario("kueue partial admission", {"size": 4, "min_size": 2, "reservation": "kueue", "kueue_queue": "team"}),
    Scenario(
        "kueue admission check with a provisioning request",
        {"size": 3, "reservation": "kueue", "kueue_queue": "provisioned"},
    ),
    Scenario("gates mode release", {"size": 2, "reservation": "gates", "provisioning_class": ATOMIC}),
    Scenario("workload api gang scheduling", {"size": 2, "reservation": "workload"}),
)


def gpu_node_count(backend: Any) -> int:
    return sum(
        1 for node in backend.objects("v1/nodes", namespace="") if "nvidia.com/gpu" in node["status"]["capacity"]
    )


def run_recorded(backend: Any, kubeconfig: Path, scenario: Scenario, dag_id: str) -> dict[str, sequences.Sequence]:
    """Run the scenario's DAG against ``backend``; its reduced sequences, the GPU node count at the start first."""
    options: dict[str, Any] = {
        "gpus": 1,
        "cpu": "1",
        "pod_template": simulated_pod(5),
        "deferrable": True,
        "reservation_timeout": timedelta(minutes=3),
        "startup_timeout": timedelta(minutes=2),
    }
    options.update(scenario.arguments)
    nodes = gpu_node_count(backend)
    since = time.time() - 1
    with airflow_connection(kubeconfig), recording(str(kubeconfig), *RECORDED) as seen:
        run_dag_test(gang_dag(dag_id, **options))
        wait_for(lambda: not leftovers(backend), timeout=90, what=f"no gang object left on {backend.name}")
    recorded = {resource: [obj for _, obj in recorder.versions] for resource, recorder in seen.items()}
    return {"GPU nodes at the start": ((str(nodes),),), **sequences.reduce(recorded, since=since)}


@pytest.fixture(scope="module")
def sim(real_session: RealBackend) -> Iterator[Any]:
    """gang-sim at real time on the real cluster's scenario, each GPU pool starting with the nodes the
    real cluster's pool has now."""
    nodes = Counter(
        (node["metadata"].get("labels") or {}).get(POOL_LABEL) for node in real_session.objects("v1/nodes", "")
    )
    pools = tuple(
        dataclasses.replace(pool, initial_nodes=nodes[pool.name]) if pool.gpus_per_node else pool
        for pool in real_session.scenario.node_pools
    )
    with sim_backend(dataclasses.replace(real_session.scenario, node_pools=pools)) as backend:
        yield backend


def describe(found: dict[str, tuple[sequences.Sequence, sequences.Sequence]]) -> str:
    return "\n".join(f"  {name}:\n    gang-sim: {sim!r}\n    real:     {real!r}" for name, (sim, real) in found.items())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_gang_sim_and_the_real_stack_agree(
    scenario: Scenario, sim: Any, cluster: Any, record_property: Callable[[str, object], None]
) -> None:
    dag_id = "differential_" + "_".join(scenario.name.split()[:3]).replace(",", "").replace(":", "")
    on_sim = run_recorded(sim, sim.kubeconfig_path, scenario, dag_id)
    on_real = run_recorded(cluster, cluster.cluster.kubeconfig_path, scenario, dag_id)
    found = sequences.differences(on_sim, on_real)
    compared = len(set(on_sim) | set(on_real))
    tally.record(record_property, "differential fidelity: sequences", scenario.name, compared - len(found), compared)
    print(f"\n{scenario.name}: {len(found)} differences\n  gang-sim: {on_sim!r}\n  real: {on_real!r}")
    verdict = explained.check(scenario.name, found)
    assert not verdict.unexplained, f"differences not in KNOWN_DIFFERENCES:\n{describe(verdict.unexplained)}"
    assert not verdict.gone, f"listed in KNOWN_DIFFERENCES but no longer different: {verdict.gone}"
