"""Differential fidelity: the same DAG on ``gang-sim`` and on the real control plane, compared.

Each scenario runs one gang through ``dag.test()`` first on ``gang-sim`` (the same scenario file,
at real time: every delay is the same real seconds) and then on the real stack (kube-apiserver,
kube-scheduler, controller-manager, kwok, Kueue 0.17, the cluster-autoscaler's kwok provider),
recording ProvisioningRequests, Workloads and pods from watches on both. :mod:`tests.real.sequences`
reduces the recordings to sequences (conditions, admission-check states, pod phases, the
``PodScheduled`` condition, gate removals against bindings) and the test compares them.

Every difference that remains is listed in :data:`KNOWN_DIFFERENCES` with both sides and the reason
it is harmless (docs/fidelity.md carries the same table). A difference not listed fails, and so does
a listed one that no longer occurs - the list stays the truth.

The scenarios run in one order on one gang-sim cluster and on the session's real cluster, so both
start each scenario with the same GPU nodes (the pool grows and, with the scenario's hour of
scale-down delay, never shrinks during a run); the first compared sequence of each scenario is that
node count. Run this module before others that grow the pool (pytest's file order does).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gang_dags import gang_dag, run_dag_test, simulated_pod
from tests.real import sequences
from tests.real.backends import airflow_connection, sim_backend, wait_for
from tests.real.conftest import leftovers
from tests.real.recording import recording

pytestmark = pytest.mark.timeout(900)
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
RECORDED = (
    "autoscaling.x-k8s.io/v1/provisioningrequests",
    "kueue.x-k8s.io/v1beta2/workloads",
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
            "size": 6,
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
)


@dataclass(frozen=True)
class Known:
    """A difference that is understood: the sequence on each side and why it does not matter to the provider."""

    sim: sequences.Sequence
    real: sequences.Sequence
    reason: str
    timing_dependent: bool = False
    """The real side depends on how fast the real components answer: on a run where they race the
    other way the sequences agree, which is not a failure."""


KNOWN_DIFFERENCES: dict[tuple[str, str], Known] = {
    **{
        ("provisioning request, best-effort-atomic, granted", f"gang 1 rank {rank} PodScheduled"): Known(
            (("False", "Unschedulable"), ("True", "")),
            (("True", ""),),
            "gang-sim creates the new nodes the pool's provisioningDelaySeconds (5 s) after "
            "Provisioned=True/CapacityIsProvisioned, as a cloud does; the real harness's kwok provider "
            "creates them at once, so the members the provider creates after Provisioned find them there. "
            "The provider reads only the ProvisioningRequest's conditions.",
            timing_dependent=True,
        )
        for rank in (0, 1)
    },
    **{
        (scenario, "workload 1 conditions"): Known(
            (
                ("PodsReady", "False", "WaitForStart"),
                ("QuotaReserved", "True", "QuotaReserved"),
                *admitted,
                ("PodsReady", "True", "Started"),
                ("Finished", "True", "Succeeded"),
            ),
            (
                ("PodsReady", "False", "WaitForStart"),
                ("QuotaReserved", "True", "QuotaReserved"),
                *admitted,
                ("PodsReady", "True", "Started"),
            ),
            "the provider deletes the gang once every member succeeded; gang-sim's Job controller and "
            "Kueue mark the Job Complete and the Workload Finished in the same instant, the real ones "
            "sometimes only after the provider's delete (then the Workload is garbage-collected "
            "unfinished). Either way the quota is released and the provider never reads Finished.",
            timing_dependent=True,
        )
        for scenario, admitted in (
            ("kueue quota admission", (("Admitted", "True", "Admitted"),)),
            ("kueue partial admission", (("Admitted", "True", "Admitted"),)),
            (
                "kueue admission check with a provisioning request",
                (("Admitted", "False", "UnsatisfiedAdmissionChecks"), ("Admitted", "True", "Admitted")),
            ),
        )
    },
    ("gates mode release", "gang 1 release order"): Known(
        (("created gated",), ("gate removed",), ("bound",), ("gate removed",), ("bound",)),
        (("created gated",), ("gate removed",), ("bound",)),
        "the provider removes the members' gates one patch each; gang-sim's scheduler binds a pod "
        "in the same instant its gate goes, the real scheduler's queue takes longer than the second "
        "patch. Each member is bound only after its own gate is gone on both (the per-member "
        "sequences agree) and the ProvisioningRequest holds the capacity for all of them.",
        timing_dependent=True,
    ),
}
"""By (scenario name, sequence name). The same rows, with the fixes that removed the others, are the
table in docs/fidelity.md, section "Controllers"."""


@dataclass
class Tally:
    matched: int = 0
    total: int = 0


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
def sim() -> Iterator[Any]:
    with sim_backend() as backend:
        yield backend


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    counts = Tally()
    yield counts
    print(f"\ndifferential fidelity: {counts.matched} of {counts.total} sequences match")


def describe(found: dict[str, tuple[sequences.Sequence, sequences.Sequence]]) -> str:
    return "\n".join(f"  {name}:\n    gang-sim: {sim!r}\n    real:     {real!r}" for name, (sim, real) in found.items())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_gang_sim_and_the_real_stack_agree(scenario: Scenario, sim: Any, cluster: Any, tally: Tally) -> None:
    dag_id = "differential_" + "_".join(scenario.name.split()[:3]).replace(",", "").replace(":", "")
    on_sim = run_recorded(sim, sim.harness.kubeconfig_path, scenario, dag_id)
    on_real = run_recorded(cluster, cluster.cluster.kubeconfig_path, scenario, dag_id)
    found = sequences.differences(on_sim, on_real)
    tally.total += len(set(on_sim) | set(on_real))
    tally.matched += len(set(on_sim) | set(on_real)) - len(found)
    print(f"\n{scenario.name}: {len(found)} differences\n  gang-sim: {on_sim!r}\n  real: {on_real!r}")
    known = {name: entry for (where, name), entry in KNOWN_DIFFERENCES.items() if where == scenario.name}
    unexplained = {name: sides for name, sides in found.items() if name not in known or listed(known[name]) != sides}
    gone = sorted(name for name, entry in known.items() if name not in found and not entry.timing_dependent)
    assert not unexplained, f"differences not in KNOWN_DIFFERENCES:\n{describe(unexplained)}"
    assert not gone, f"listed in KNOWN_DIFFERENCES but no longer different: {gone}"


def listed(entry: Known) -> tuple[sequences.Sequence, sequences.Sequence]:
    return entry.sim, entry.real
