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
  index, and whether any pod is still gated;
- a PodGroup with ``spec.schedulingConstraints.topology``: its ``PodGroupInitiallyScheduled``
  status, reason and message (the counts of the placement it reports masked: the real scheduler
  reports one drawn at random), the racks its pods are bound to and their ``PodScheduled`` status and
  reason (each pod's message depends on its place in the placement reported and the cycle, upstream);
- a ProvisioningRequest whose pod template selects rack-b2: its ``Provisioned`` condition and the
  nodes the autoscaler added to rack-b2.

Hosts differ in name (``rack-b1-1`` on kwok, ``gke-sim-rack-b1-pbvb`` on gang-sim), so a host is
compared as its rack and the filler pods on it (``rack-b1/fill-b1-0``, ``rack-b1/-``). Kueue 0.17
writes ``QuotaReserved=False`` with reason ``Pending`` where gang-sim, answering as Kueue 0.20, gives
the typed reason (:data:`PENDING_REASONS`); that is the only difference allowed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.kueue import tas
from gang_sim.testing.real import RealCluster
from gang_sim.world.node_topology import BLOCK_LABEL, SUBBLOCK_LABEL
from gang_sim.world.scenario import load_scenario
from tests.real.backends import RealBackend, sim_backend, wait_for
from tests.real.tally import Tally, reported

pytestmark = pytest.mark.timeout(900)
POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
WORKLOADS = "kueue.x-k8s.io/v1beta2/workloads"
REQUESTS = "autoscaling.x-k8s.io/v1/provisioningrequests"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AWAY_FROM_RACK_B2 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": SUBBLOCK_LABEL, "operator": "NotIn", "values": ["rack-b2"]}]}
            ]
        }
    }
}
"""A PodGroup's pods keep off the autoscaled rack: an unschedulable gang would otherwise make both
autoscalers grow rack-b2, at times that differ between the backends."""
POD_SPEC = {
    "restartPolicy": "Never",
    "tolerations": [GPU_TOLERATION],
    "containers": [
        {
            "name": "worker",
            "image": "registry.example/trainer:1.0",
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"},
            },
        }
    ],
}
PENDING_REASONS = {"WaitingForQuota", "NoMatchingFlavor"}
"""gang-sim's typed ``QuotaReserved=False`` reasons (Kueue 0.20) where Kueue 0.17 writes ``Pending``."""
SETTLE_SECONDS = 20.0
"""How long an outcome that binds nothing is watched for a change, in real seconds."""


@dataclass(frozen=True)
class Case:
    """One gang: ``kind`` is ``job`` (Kueue) or ``podgroup`` (Workload API)."""

    name: str
    kind: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)
    queue: str = "tas"
    job_annotations: dict[str, str] = field(default_factory=dict)
    topology_key: str = SUBBLOCK_LABEL


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


def delete(backend: Any, resource: str, name: str) -> None:
    if isinstance(backend, RealBackend):
        kind = {"v1/pods": "pod", "batch/v1/jobs": "job", POD_GROUPS: "podgroups.v1beta1.scheduling.k8s.io"}
        kind[REQUESTS] = "provisioningrequests.v1.autoscaling.x-k8s.io"
        kind["v1/podtemplates"] = "podtemplate"
        backend.cluster.kubectl(
            "delete",
            kind[resource],
            name,
            "-n",
            "default",
            "--cascade=background",
            "--wait=false",
            "--ignore-not-found",
        )
    else:
        backend.run(lambda: backend.store.delete(resource, name, "default", propagation_policy="Background"))


def hosts(backend: Any) -> dict[str, str]:
    """Node name -> ``<rack>/<filler pods on it>`` (the name both backends share for a host)."""
    fillers: dict[str, list[str]] = {}
    for pod in backend.objects("v1/pods", label_selector="app=filler"):
        if pod["spec"].get("nodeName"):
            fillers.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    names = {}
    for node in backend.objects("v1/nodes", namespace=""):
        name = node["metadata"]["name"]
        rack = node["metadata"]["labels"].get(SUBBLOCK_LABEL, "-")
        names[name] = f"{rack}/{','.join(sorted(fillers.get(name, []))) or '-'}"
    return names


def gang_pods(backend: Any, name: str) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = backend.objects("v1/pods", label_selector=f"gang={name}")
    return pods


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((item for item in (obj.get("status") or {}).get("conditions") or [] if item["type"] == kind), None)


# -- Kueue Jobs ------------------------------------------------------------------------------------


def job(case: Case, name: str) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": case.queue}
    template = {"metadata": {"labels": {"gang": name}, "annotations": case.annotations}, "spec": POD_SPEC}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels, "annotations": case.job_annotations},
        "spec": {
            "parallelism": case.size,
            "completions": case.size,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": template,
        },
    }


def workload_of(backend: Any, name: str) -> dict[str, Any] | None:
    return next(
        (item for item in backend.objects(WORKLOADS) if item["metadata"]["name"].startswith(f"job-{name}-")), None
    )


def decided(backend: Any, name: str) -> dict[str, Any] | None:
    """The Job's Workload once it has a ``QuotaReserved`` condition."""
    found = workload_of(backend, name)
    return found if found is not None and condition(found, "QuotaReserved") is not None else None


def job_outcome(backend: Any, case: Case, name: str) -> dict[str, Any]:
    backend.create("batch/v1/jobs", job(case, name), "default")
    workload = wait_for(lambda: decided(backend, name), timeout=90, what=f"{name}'s Workload decided on")
    reserved = condition(workload, "QuotaReserved") or {}
    if reserved["status"] == "True":
        count = workload["status"]["admission"]["podSetAssignments"][0]["count"]
        wait_for(
            lambda: len([pod for pod in gang_pods(backend, name) if pod["spec"].get("nodeName")]) == count,
            timeout=120,
            what=f"{name}'s {count} pods bound",
        )
    else:
        time.sleep(SETTLE_SECONDS)
    workload = workload_of(backend, name) or workload
    reserved = condition(workload, "QuotaReserved") or {}
    names = hosts(backend)
    pods = gang_pods(backend, name)
    outcome: dict[str, Any] = {
        "QuotaReserved": (reserved["status"], reserved["message"]),
        "reason": reserved["reason"],
        "pods": len(pods),
        "gated": sorted({gate["name"] for pod in pods for gate in pod["spec"].get("schedulingGates") or []}),
    }
    admission = (workload.get("status") or {}).get("admission")
    if admission:
        (assignment,) = admission["podSetAssignments"]
        topology = assignment.get("topologyAssignment") or {"levels": []}
        outcome["count"] = assignment["count"]
        outcome["levels"] = topology["levels"]
        outcome["assignment"] = [
            (names.get(values[-1], values[-1]), count) for values, count in tas.domains_of(topology)
        ]
        by_index = {int(pod["metadata"]["labels"][tas.JOB_INDEX_LABEL]): names[pod["spec"]["nodeName"]] for pod in pods}
        outcome["ranks"] = [by_index[index] for index in sorted(by_index)]
    delete(backend, "batch/v1/jobs", name)
    wait_for(
        lambda: not gang_pods(backend, name) and workload_of(backend, name) is None, timeout=120, what=f"{name} gone"
    )
    return outcome


# -- PodGroups -----------------------------------------------------------------------------------


def first_placement(message: str) -> str:
    """``message`` with the reported placement's counts masked: the real scheduler reports a
    placement drawn at random (a map's order), gang-sim the first in name order."""
    return re.sub(r"\d+ scheduled, \d+ remaining", "<s> scheduled, <r> remaining", message)


def podgroup_outcome(backend: Any, case: Case, name: str) -> dict[str, Any]:
    spec = {
        "schedulingPolicy": {"gang": {"minCount": case.size}},
        "schedulingConstraints": {"topology": [{"key": case.topology_key}]},
    }
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    created = backend.create(POD_GROUPS, group, "default")
    for index in range(case.size):
        pod_spec = {**POD_SPEC, "schedulingGroup": {"podGroupName": name}, "affinity": AWAY_FROM_RACK_B2}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{index}", "labels": {"gang": name}},
            "spec": pod_spec,
        }
        backend.create("v1/pods", body, "default")
    found = wait_for(
        lambda: next(
            (
                item
                for item in backend.objects(POD_GROUPS)
                if item["metadata"]["name"] == name and condition(item, "PodGroupInitiallyScheduled")
            ),
            None,
        ),
        timeout=90,
        what=f"{name}'s first scheduling outcome",
    )
    scheduled = condition(found, "PodGroupInitiallyScheduled") or {}
    if scheduled["status"] == "True":
        wait_for(
            lambda: all(pod["spec"].get("nodeName") for pod in gang_pods(backend, name)),
            timeout=60,
            what=f"{name} bound",
        )
    else:
        time.sleep(SETTLE_SECONDS)
    names = hosts(backend)
    pods = gang_pods(backend, name)
    outcome = {
        "constraint kept": "schedulingConstraints" in created["spec"],
        "PodGroupInitiallyScheduled": (
            scheduled["status"],
            scheduled["reason"],
            first_placement(scheduled.get("message", "")),
        ),
        # racks, not hosts: within the rack each pod goes where the scheduler's node scores (and, on a
        # tie, its random pick) put it, which the topology does not decide
        "bound": sorted(names[pod["spec"]["nodeName"]].split("/")[0] for pod in pods if pod["spec"].get("nodeName")),
        "pods scheduled": sorted(
            {
                (item["status"], item.get("reason", ""))
                for pod in pods
                for item in (pod.get("status") or {}).get("conditions") or []
                if item["type"] == "PodScheduled"
            }
        ),
    }
    for pod in pods:
        delete(backend, "v1/pods", pod["metadata"]["name"])
    delete(backend, POD_GROUPS, name)
    wait_for(lambda: not gang_pods(backend, name), timeout=60, what=f"{name}'s pods gone")
    return outcome


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


@pytest.fixture(scope="module")
def tally(pytestconfig: pytest.Config) -> Iterator[Tally]:
    yield from reported(pytestconfig, "topology differential: compared values")


OUTCOMES: dict[str, Callable[[Any, Case, str], dict[str, Any]]] = {"job": job_outcome, "podgroup": podgroup_outcome}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_gang_sim_and_real_kueue_and_scheduler_place_the_gang_alike(
    case: Case, backends: dict[str, Any], tally: Tally
) -> None:
    name = f"t{CASES.index(case)}"
    found = {side: OUTCOMES[case.kind](backend, case, name) for side, backend in backends.items()}
    print(f"\n{case.name}\n  gang-sim: {json.dumps(found['gang-sim'])}\n  real:     {json.dumps(found['real'])}")
    different = differences(found["gang-sim"], found["real"])
    tally.count(len(set(found["gang-sim"]) | set(found["real"])), len(different))
    assert not different, f"{case.name}: {different}"


def provisioned(backend: Any) -> dict[str, Any] | None:
    """The ProvisioningRequest once ``Provisioned=True``."""
    requests = backend.objects(REQUESTS)
    return requests[0] if requests and (condition(requests[0], "Provisioned") or {}).get("status") == "True" else None


def rack_b2_nodes(backend: Any) -> list[dict[str, Any]] | None:
    """rack-b2's nodes once both are there."""
    nodes: list[dict[str, Any]] = backend.objects("v1/nodes", namespace="", label_selector=f"{SUBBLOCK_LABEL}=rack-b2")
    return nodes if len(nodes) == 2 else None


def autoscaler_outcome(backend: Any) -> dict[str, Any]:
    """A best-effort-atomic request for six 1-GPU pods selecting rack-b2: what the autoscaler did."""
    spec = {**POD_SPEC, "nodeSelector": {SUBBLOCK_LABEL: "rack-b2"}}
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "rack-b2"}, "template": {"spec": spec}}
    pod_sets = [{"podTemplateRef": {"name": "rack-b2"}, "count": 6}]
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "rack-b2"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "podSets": pod_sets},
    }
    backend.create("v1/podtemplates", template, "default")
    backend.create(REQUESTS, request, "default")
    granted = wait_for(lambda: provisioned(backend), timeout=180, what="the request provisioned")
    grown = wait_for(lambda: rack_b2_nodes(backend), timeout=180, what="rack-b2's two nodes")
    delete(backend, REQUESTS, "rack-b2")
    delete(backend, "v1/podtemplates", "rack-b2")
    return {
        "Provisioned": (condition(granted, "Provisioned") or {}).get("reason"),
        "nodes": len(grown),
        "blocks": sorted({node["metadata"]["labels"][BLOCK_LABEL] for node in grown}),
        "distinct hostnames": len({node["metadata"]["labels"]["kubernetes.io/hostname"] for node in grown}),
    }


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
        }
    )


def test_with_the_gate_off_the_real_apiserver_drops_the_constraint_as_gang_sim_does() -> None:
    """KEP-5732's field without ``TopologyAwareWorkloadScheduling``: the PodGroup is created, with no
    error and no warning, without ``schedulingConstraints`` (``pkg/registry/scheduling/podgroup/strategy.go``)."""
    # the cluster without Kueue (nor its objects): only the apiserver is asked
    scenario = dataclasses.replace(load_scenario("topology"), feature_gates=frozenset(), objects=())
    spec = {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topology": [{"key": SUBBLOCK_LABEL}]},
    }
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "no-gate"},
        "spec": spec,
    }
    with RealCluster(scenario, kueue=False, autoscaler=False) as cluster:
        answer = subprocess.run(
            [
                str(cluster.binaries.path("kubectl")),
                "--kubeconfig",
                str(cluster.kubeconfig_path),
                "create",
                "-o",
                "json",
                "-f",
                "-",
            ],
            input=yaml.safe_dump(group),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    with sim_backend(scenario) as sim:
        simulated = sim.create(POD_GROUPS, group, "default")["spec"]
    real = json.loads(answer.stdout)["spec"]
    print(f"\ngate off\n  gang-sim: {simulated}\n  real:     {real}\n  real stderr: {answer.stderr!r}")
    assert "schedulingConstraints" not in real and "schedulingConstraints" not in simulated
    assert real["schedulingPolicy"] == simulated["schedulingPolicy"] == spec["schedulingPolicy"]
    assert answer.stderr == ""  # no Warning: header either


def refusal(backend: Any, body: dict[str, Any]) -> str:
    """The message a create of ``body`` is refused with (``""``: accepted)."""
    if isinstance(backend, RealBackend):
        cluster = backend.cluster
        command = [
            str(cluster.binaries.path("kubectl")),
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "create",
            "-f",
            "-",
        ]
        answer = subprocess.run(
            command, input=yaml.safe_dump(body), capture_output=True, text=True, timeout=60, check=False
        )
        return answer.stderr.strip().removeprefix('Error from server (Forbidden): error when creating "STDIN": ')
    try:
        backend.create("batch/v1/jobs", body, "default")
    except ApiError as error:
        return f"{error.message}"
    return ""


def test_contradicting_tas_annotations_are_refused_alike(backends: dict[str, Any]) -> None:
    case = Case("both", "job", 2, {tas.REQUIRED: SUBBLOCK_LABEL, tas.PREFERRED: SUBBLOCK_LABEL})
    found = {side: refusal(backend, job(case, "both")) for side, backend in backends.items()}
    print(f"\nrefused\n  gang-sim: {found['gang-sim']}\n  real:     {found['real']}")
    assert found["gang-sim"] == found["real"]
    assert found["real"].startswith('admission webhook "vjob.kb.io" denied the request: ')
