"""Topology-aware gangs on real Kueue 0.17 and the real kube-scheduler 1.37, against gang-sim: the
differential test of the ``topology`` scenario (``gang_sim/world/scenarios/topology.yaml``).

Both backends start the same scenario: racks rack-a1 (2 GPUs free, one per host), rack-a2 (3 free on
one host), rack-b1 (6 free: 2 + 4), and the autoscaled, empty rack-b2; Kueue's Topology
``gke-default`` (block, rack, hostname) behind queue ``tas``, a flavor without topology behind
queue ``plain``; ``TopologyAwareWorkloadScheduling`` on. Each case runs first on gang-sim (at real
time), then on the real control plane, each on a clean cluster (the case's objects deleted after
it), and the outcomes are compared:

- a Kueue Job (Indexed, 1-GPU pods, the TAS annotations on its pod template): the Workload's
  ``QuotaReserved`` status and message, its ``topologyAssignment`` and the host of each completion
  index (by the hosts' shared names, not in hostname order: :func:`~tests.real.topology_outcomes.job_outcome`),
  and whether any pod is still gated;
- a PodGroup with ``spec.schedulingConstraints.topology``: its ``PodGroupInitiallyScheduled``
  status, reason and message (the counts of the placement it reports masked: the real scheduler
  reports one drawn at random), the racks its pods are bound to and their ``PodScheduled`` status and
  reason (each pod's message depends on its place in the placement reported and the cycle, upstream);
- a ProvisioningRequest whose pod template selects rack-b2: its ``Provisioned`` condition and the
  nodes the autoscaler added to rack-b2;
- a Job with two TAS annotations: Kueue's webhook's refusal;
- with the gate off, a PodGroup created with ``schedulingConstraints`` (a cluster of its own).

What each backend did is read by :mod:`tests.real.topology_outcomes` (a host named by its rack and
the filler pods on it, as node names differ between the backends). Kueue 0.17
writes ``QuotaReserved=False`` with reason ``Pending`` where gang-sim, answering as Kueue 0.20, gives
the typed reason (:data:`PENDING_REASONS`); that is the only difference allowed.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from gang_sim.controllers.kueue import tas
from gang_sim.testing.real import RealCluster
from gang_sim.world.node_topology import BLOCK_LABEL, SUBBLOCK_LABEL
from gang_sim.world.scenario import load_scenario
from tests.real import tally
from tests.real.backends import RealBackend, sim_backend
from tests.real.topology_outcomes import (
    POD_GROUPS,
    Case,
    autoscaler_outcome,
    job,
    job_outcome,
    podgroup_outcome,
    refusal,
)

pytestmark = pytest.mark.timeout(900)
PENDING_REASONS = {"WaitingForQuota", "NoMatchingFlavor"}
"""gang-sim's typed ``QuotaReserved=False`` reasons (Kueue 0.20) where Kueue 0.17 writes ``Pending``."""
RACK = {tas.REQUIRED: SUBBLOCK_LABEL}
CASES = (
    Case("kueue required rack, 4: the one rack that holds it", "job", 4, RACK),
    Case("kueue required rack, 5: a full host and one GPU of the other", "job", 5, RACK),
    Case("kueue required rack, 7: no rack holds it", "job", 7, RACK),
    Case("kueue required block, 5: the block with the least room that holds it", "job", 5, {tas.REQUIRED: BLOCK_LABEL}),
    Case("kueue preferred rack, 8: over both blocks", "job", 8, {tas.PREFERRED: SUBBLOCK_LABEL}),
    Case("kueue no annotation in a TAS-only queue, 2: unconstrained", "job", 2),
    Case(
        "kueue required rack, 8, min 2: partial admission to what a rack holds",
        "job",
        8,
        RACK,
        job_annotations={"kueue.x-k8s.io/job-min-parallelism": "2"},
    ),
    Case("kueue required rack in a queue without topology: refused", "job", 2, RACK, queue="plain"),
    Case("podgroup rack, 4: the one rack that holds it", "podgroup", 4),
    Case("podgroup rack, 7: no rack holds it", "podgroup", 7),
    Case("podgroup rack, 3: of two racks that hold it, the fuller", "podgroup", 3),
    Case("podgroup on a label no node has: no placement", "podgroup", 2, topology_key="example.com/row"),
)


# -- the two backends ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, Any]]:
    """gang-sim, then the real control plane, on the ``topology`` scenario."""
    scenario = load_scenario("topology")
    with sim_backend(scenario) as sim, RealCluster(scenario) as cluster:
        yield {"gang-sim": sim, "real": RealBackend(cluster)}


# -- the comparison ------------------------------------------------------------------------------


def explained(name: str, sim: Any, real: Any) -> bool:
    """The one allowed difference: Kueue 0.17's ``Pending`` against gang-sim's typed reason."""
    return name == "reason" and real == "Pending" and sim in PENDING_REASONS


def differences(on_sim: dict[str, Any], on_real: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {
        key: (on_sim.get(key), on_real.get(key))
        for key in sorted(set(on_sim) | set(on_real))
        if on_sim.get(key) != on_real.get(key) and not explained(key, on_sim.get(key), on_real.get(key))
    }


OUTCOMES: dict[str, Callable[[Any, Case, str], dict[str, Any]]] = {"job": job_outcome, "podgroup": podgroup_outcome}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_gang_sim_and_real_kueue_and_scheduler_place_the_gang_alike(
    case: Case, backends: dict[str, Any], record_property: Callable[[str, object], None]
) -> None:
    name = f"t{CASES.index(case)}"
    found = {side: OUTCOMES[case.kind](backend, case, name) for side, backend in backends.items()}
    print(f"\n{case.name}\n  gang-sim: {json.dumps(found['gang-sim'])}\n  real:     {json.dumps(found['real'])}")
    different = differences(found["gang-sim"], found["real"])
    compared = len(set(found["gang-sim"]) | set(found["real"]))
    alike = compared - len(different)
    tally.record(record_property, "topology differential: compared values", case.name, alike, compared)
    assert not different, f"{case.name}: {different}"


def test_the_rack_a_provisioning_request_pins_is_the_one_the_autoscaler_grows(backends: dict[str, Any]) -> None:
    found = {side: autoscaler_outcome(backend) for side, backend in backends.items()}
    print(f"\nautoscaler\n  gang-sim: {found['gang-sim']}\n  real:     {found['real']}")
    assert (
        found["gang-sim"]
        == found["real"]
        == {
            "Provisioned": "CapacityIsProvisioned",
            "nodes": 2,
            "blocks": ["block-b"],
            "distinct hostnames": 2,
            "distinct topology hosts": 2,
        }
    )


def created(kubectl: list[str], body: dict[str, Any], *options: str) -> subprocess.CompletedProcess[str]:
    """``kubectl create -o json -f -`` of ``body`` (with ``options``), its output kept."""
    command = [*kubectl, "create", *options, "-o", "json", "-f", "-"]
    return subprocess.run(command, input=yaml.safe_dump(body), capture_output=True, text=True, timeout=60, check=True)


def test_with_the_gate_off_the_real_apiserver_drops_the_constraint_as_gang_sim_does() -> None:
    """KEP-5732's field without ``TopologyAwareWorkloadScheduling``: the PodGroup is created, with no
    error and no warning, without ``schedulingConstraints`` (``pkg/registry/scheduling/podgroup/strategy.go``);
    a server-side dry run answers the same, so a client can learn the gate is off before it creates
    anything."""
    # the cluster without Kueue (nor its objects): only the apiserver is asked
    scenario = dataclasses.replace(load_scenario("topology"), feature_gates=frozenset(), objects=())
    constraints = {"topology": [{"key": SUBBLOCK_LABEL}]}
    spec = {"schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": constraints}
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "no-gate"},
        "spec": spec,
    }
    with RealCluster(scenario, kueue=False, autoscaler=False) as cluster:
        kubectl = [str(cluster.binaries.path("kubectl")), "--kubeconfig", str(cluster.kubeconfig_path)]
        dry_run = created(kubectl, group, "--dry-run=server")
        answer = created(kubectl, group)
    with sim_backend(scenario) as sim:
        simulated_dry_run = sim.run(lambda: sim.store.create(POD_GROUPS, group, "default", dry_run=True))["spec"]
        simulated = sim.create(POD_GROUPS, group, "default")["spec"]
    real = json.loads(answer.stdout)["spec"]
    print(f"\ngate off\n  gang-sim: {simulated}\n  real:     {real}\n  real stderr: {answer.stderr!r}")
    for found in (real, simulated, json.loads(dry_run.stdout)["spec"], simulated_dry_run):
        assert "schedulingConstraints" not in found
        assert found["schedulingPolicy"] == spec["schedulingPolicy"]
    assert answer.stderr == dry_run.stderr == ""  # no Warning: header either


def test_contradicting_tas_annotations_are_refused_alike(backends: dict[str, Any]) -> None:
    case = Case("both", "job", 2, {tas.REQUIRED: SUBBLOCK_LABEL, tas.PREFERRED: SUBBLOCK_LABEL})
    found = {side: refusal(backend, job(case, "both")) for side, backend in backends.items()}
    print(f"\nrefused\n  gang-sim: {found['gang-sim']}\n  real:     {found['real']}")
    assert found["gang-sim"] == found["real"]
    assert found["real"].startswith('admission webhook "vjob.kb.io" denied the request: ')
