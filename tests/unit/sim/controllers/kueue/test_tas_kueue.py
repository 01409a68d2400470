"""Topology Aware Scheduling in the simulated Kueue, without a Store: requests from annotations, the
flavors TAS refuses, quota reservation with a topology assignment (or Kueue's message why not), and
the TopologyUngater's pod patches (kubernetes-sigs/kueue v0.17.0)."""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

import pytest

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.kueue import job_validation, scheduler, tas, ungater
from gang_sim.controllers.kueue.patches import AssumeUsage, Condition, WorkloadStatus
from gang_sim.controllers.kueue.snapshot import QueueSnapshot, ReservationSnapshot, TopologyState
from gang_sim.controllers.kueue.tas_placement import Placement

RACK, HOST = "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"
BLOCK = "cloud.google.com/gce-topology-block"
POD = {
    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}
TOPOLOGY = {
    "metadata": {"name": "gke"},
    "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]},
}
TAS_FLAVOR = {"metadata": {"name": "tas"}, "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "gke"}}
PLAIN_FLAVOR = {"metadata": {"name": "plain"}, "spec": {"nodeLabels": {"pool": "gpu"}}}
WALL = datetime(2025, 1, 1, tzinfo=timezone.utc)


def node(name: str, rack: str, gpus: int = 4) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {BLOCK: "b1", RACK: rack, HOST: name, "pool": "gpu"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "48", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


NODES = (node("r1-a", "r1", 2), node("r1-b", "r1", 1), node("r2-a", "r2", 4), node("r2-b", "r2", 2))
"""Rack r1 holds 3 one-GPU pods, rack r2 holds 6."""


def queue(*flavors: str, gpus: str = "32") -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": "100"}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    groups = [
        {
            "coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [{"name": f, "resources": resources} for f in flavors],
        }
    ]
    return {"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": groups}}


def config(*flavors: str, topologies: bool = True) -> QueueSnapshot:
    return QueueSnapshot(
        flavors={"tas": TAS_FLAVOR, "plain": PLAIN_FLAVOR},
        cluster_queues={"cq": queue(*flavors)},
        local_queues={("default", "lq"): {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}},
        admission_checks={},
        provisioning_configs={},
        topologies={"gke": TOPOLOGY} if topologies else {},
    )


def workload(count: int, annotations: dict[str, str] | None = None, *, min_count: int | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {
        "name": "main",
        "count": count,
        "template": {"spec": POD},
        "topologyRequest": tas.topology_request(annotations or {}, tas.JOB_INDEX_LABEL),
    }
    if min_count is not None:
        pod_set["minCount"] = min_count
    return {
        "metadata": {"name": "job-train-abcde", "namespace": "default", "uid": "wl-uid"},
        "spec": {"queueName": "lq", "podSets": [pod_set]},
        "status": {},
    }


def reserve(wl: dict[str, Any], snapshot_config: QueueSnapshot, usage: dict[str, Any] | None = None) -> list[Any]:
    state = TopologyState(NODES, {}, usage or {})
    return scheduler.reserve(ReservationSnapshot(wl, snapshot_config, {}, {}, 0.0, WALL, state))


def status_of(patches: list[Any]) -> WorkloadStatus:
    return next(patch for patch in patches if isinstance(patch, WorkloadStatus))


REQUIRED_RACK = {tas.REQUIRED: RACK}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, {"podIndexLabel": tas.JOB_INDEX_LABEL}, id="none-only-the-index-label"),
        pytest.param(REQUIRED_RACK, {"required": RACK, "podIndexLabel": tas.JOB_INDEX_LABEL}, id="required"),
        pytest.param(
            {tas.PREFERRED: RACK, tas.UNCONSTRAINED: "true"},
            {"preferred": RACK, "podIndexLabel": tas.JOB_INDEX_LABEL},
            id="preferred-before-unconstrained",
        ),
        pytest.param(
            {tas.UNCONSTRAINED: "true"},
            {"unconstrained": True, "podIndexLabel": tas.JOB_INDEX_LABEL},
            id="unconstrained",
        ),
    ],
)
def test_topology_request_from_the_templates_annotations(annotations: dict[str, str], expected: dict[str, Any]) -> None:
    assert tas.topology_request(annotations, tas.JOB_INDEX_LABEL) == expected


@pytest.mark.parametrize(
    ("flavors", "annotations", "topologies", "expected"),
    [
        pytest.param(
            ("plain",),
            REQUIRED_RACK,
            True,
            {"plain": 'Flavor "plain" does not support TopologyAwareScheduling'},
            id="tas-asked-flavor-without-topology",
        ),
        pytest.param(
            ("tas", "plain"),
            {},
            True,
            {"tas": 'Flavor "tas" supports only TopologyAwareScheduling'},
            id="no-tas-asked-tas-flavor",
        ),
        pytest.param(("tas",), {}, True, {}, id="tas-only-queue-implies-tas"),
        pytest.param(
            ("tas",),
            {tas.REQUIRED: "example.com/row"},
            True,
            {"tas": 'Flavor "tas" does not contain the requested level'},
            id="level-not-in-topology",
        ),
        pytest.param(
            ("tas",),
            REQUIRED_RACK,
            False,
            {"tas": 'Flavor "tas" information missing in TAS cache'},
            id="topology-missing",
        ),
        pytest.param(
            ("tas", "plain"),
            REQUIRED_RACK,
            True,
            {"plain": 'Flavor "plain" does not support TopologyAwareScheduling'},
            id="tas-asked-mixed-queue",
        ),
    ],
)
def test_flavors_tas_refuses_to_a_pod_set(
    flavors: tuple[str, ...], annotations: dict[str, str], topologies: bool, expected: dict[str, str]
) -> None:
    snapshot_config = config(*flavors, topologies=topologies)
    pod_set = workload(2, annotations)["spec"]["podSets"][0]
    assert (
        tas.flavor_refusals(pod_set, queue(*flavors), snapshot_config.flavors, snapshot_config.topologies) == expected
    )


def test_a_required_rack_podset_is_admitted_with_its_topology_assignment_in_kueues_format() -> None:
    patches = reserve(workload(5, REQUIRED_RACK), config("tas"))
    (assignment,) = status_of(patches).fields["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"] == {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "r2-", "roots": ["a", "b"]}}],
                "podCounts": {"individual": [4, 1]},
            }
        ],
    }
    (assumed,) = [patch for patch in patches if isinstance(patch, AssumeUsage)]
    assert assumed.topology_usage["tas"]["r2-a"]["nvidia.com/gpu"] == Fraction(4)


def test_a_podset_no_rack_holds_waits_with_kueues_message_and_no_assignment() -> None:
    patches = reserve(workload(7, REQUIRED_RACK), config("tas"))
    assert patches == [
        WorkloadStatus(
            (
                Condition(
                    "QuotaReserved",
                    "False",
                    "WaitingForQuota",
                    'couldn\'t assign flavors to pod set main: topology "gke" allows to fit only 6 out of 7 pod(s)',
                ),
            )
        )
    ]


def test_what_other_workloads_hold_in_a_rack_counts() -> None:
    held = {"tas": {"r2-a": {"nvidia.com/gpu": Fraction(4), "pods": Fraction(4)}}}
    message = status_of(reserve(workload(4, REQUIRED_RACK), config("tas"), held)).conditions[0].message
    assert message.endswith(
        'topology "gke" allows to fit only 3 out of 4 pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 1'
    )


def test_partial_admission_finds_the_largest_count_a_rack_holds() -> None:
    patches = reserve(workload(8, REQUIRED_RACK, min_count=2), config("tas"))
    (assignment,) = status_of(patches).fields["admission"]["podSetAssignments"]
    assert assignment["count"] == 6
    assert tas.domains_of(assignment["topologyAssignment"]) == [(("r2-a",), 4), (("r2-b",), 2)]


def test_a_queue_without_a_topology_flavor_refuses_a_tas_podset_naming_the_flavor() -> None:
    condition = status_of(reserve(workload(2, REQUIRED_RACK), config("plain"))).conditions[0]
    assert (condition.reason, condition.message) == (
        "NoMatchingFlavor",
        'couldn\'t assign flavors to pod set main: Flavor "plain" does not support TopologyAwareScheduling',
    )


def test_a_tas_only_queue_places_a_podset_without_annotations_unconstrained() -> None:
    (assignment,) = status_of(reserve(workload(2), config("tas"))).fields["admission"]["podSetAssignments"]
    assert tas.domains_of(assignment["topologyAssignment"]) == [(("r1-a",), 2)]  # the fullest host that holds it


def test_a_missing_topology_makes_the_queue_inactive() -> None:
    condition = status_of(reserve(workload(2, REQUIRED_RACK), config("tas", topologies=False))).conditions[0]
    assert (condition.reason, condition.message) == ("Inadmissible", "ClusterQueue cq is inactive")


def test_a_queue_without_tas_admits_as_before_with_no_assignment() -> None:
    (assignment,) = status_of(reserve(workload(2), config("plain"))).fields["admission"]["podSetAssignments"]
    assert "topologyAssignment" not in assignment


# -- the TopologyUngater --------------------------------------------------------------------------


def admitted(domains: list[tuple[str, int]]) -> dict[str, Any]:
    wl = workload(sum(count for _, count in domains), REQUIRED_RACK)
    placement = tas.to_api(Placement((HOST,), tuple(((host,), count) for host, count in domains)))
    wl["status"] = {
        "conditions": [{"type": "Admitted", "status": "True"}],
        "admission": {"podSetAssignments": [{"name": "main", "count": 4, "topologyAssignment": placement}]},
    }
    return wl


def member(
    index: int | None, *, gated: bool = True, host: str | None = None, name: str | None = None
) -> dict[str, Any]:
    labels = {tas.PODSET_LABEL: "main"}
    if index is not None:
        labels[tas.JOB_INDEX_LABEL] = str(index)
    spec: dict[str, Any] = {"schedulingGates": [{"name": tas.TOPOLOGY_GATE}] if gated else []}
    if host is not None:
        spec["nodeSelector"] = {HOST: host}
    return {
        "metadata": {
            "name": name or f"train-{index}",
            "namespace": "default",
            "labels": labels,
            "annotations": {tas.WORKLOAD_ANNOTATION: "job-train-abcde"},
        },
        "spec": spec,
    }


def placed(patches: list[Any]) -> dict[str, str]:
    return {patch.name: patch.body["spec"]["nodeSelector"][HOST] for patch in patches}


def test_consecutive_completion_indices_share_the_lowest_domains() -> None:
    pods = [member(index) for index in (3, 0, 2, 1)]
    patches = ungater.ungate(admitted([("r2-a", 3), ("r2-b", 1)]), pods)
    assert placed(patches) == {"train-0": "r2-a", "train-1": "r2-a", "train-2": "r2-a", "train-3": "r2-b"}
    assert all(patch.body["spec"]["schedulingGates"] == [] for patch in patches)


def test_without_indices_gated_pods_fill_the_domains_greedily_around_the_ungated_ones() -> None:
    pods = [member(None, gated=False, host="r2-a", name="a"), member(None, name="b"), member(None, name="c")]
    pods.append(member(None, name="d"))
    patches = ungater.ungate(admitted([("r2-a", 3), ("r2-b", 1)]), pods)
    assert placed(patches) == {"b": "r2-a", "c": "r2-a", "d": "r2-b"}


def test_an_ungated_pod_out_of_its_ranks_domain_falls_back_to_greedy() -> None:
    pods = [member(0, gated=False, host="r2-b"), member(1), member(2), member(3)]
    patches = ungater.ungate(admitted([("r2-a", 3), ("r2-b", 1)]), pods)
    assert placed(patches) == {"train-1": "r2-a", "train-2": "r2-a", "train-3": "r2-a"}


def test_a_workload_not_admitted_or_other_workloads_pods_are_left_alone() -> None:
    not_admitted = admitted([("r2-a", 4)])
    not_admitted["status"]["conditions"] = []
    assert ungater.ungate(not_admitted, [member(0)]) == []
    stranger = member(0)
    stranger["metadata"]["annotations"][tas.WORKLOAD_ANNOTATION] = "another"
    assert ungater.ungate(admitted([("r2-a", 4)]), [stranger]) == []


# -- Kueue's Job webhook: the TAS annotations -----------------------------------------------------

LABEL_KEY_NAME = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
REQUIRED_AT = "spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]"


def queued_job(annotations: dict[str, str], count: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "tas"}},
        "spec": {"parallelism": count, "completions": count, "template": {"metadata": {"annotations": annotations}}},
    }


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        pytest.param(
            {tas.REQUIRED: RACK, tas.PREFERRED: RACK},
            "spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: "
            '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
            '"kueue.x-k8s.io/podset-unconstrained-topology"]',
            id="required-and-preferred",
        ),
        pytest.param(
            {tas.REQUIRED: "not a label/"},
            f'[{REQUIRED_AT}: Invalid value: "not a label/": prefix part {SUBDOMAIN}, '
            f'{REQUIRED_AT}: Invalid value: "not a label/": name part must be non-empty, '
            f'{REQUIRED_AT}: Invalid value: "not a label/": {LABEL_KEY_NAME}]',
            id="level-not-a-label-key",
        ),
        pytest.param(
            {tas.UNCONSTRAINED: "maybe"},
            "spec.template.metadata.annotations[kueue.x-k8s.io/podset-unconstrained-topology]: Invalid value: "
            '"maybe": must be a boolean value',
            id="unconstrained-not-a-boolean",
        ),
        pytest.param(
            {tas.REQUIRED: RACK, "kueue.x-k8s.io/podset-slice-required-topology": RACK},
            "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Required value: must be set when "
            "'kueue.x-k8s.io/podset-slice-required-topology' is specified",
            id="slice-without-size",
        ),
    ],
)
def test_kueues_job_webhook_refuses_contradicting_tas_annotations_as_real_kueue_does(
    annotations: dict[str, str], message: str
) -> None:
    """The messages are what real Kueue 0.17's ``vjob.kb.io`` answered on the real tier."""
    with pytest.raises(ApiError) as raised:
        job_validation.validate_on_create("batch/v1/jobs", queued_job(annotations))
    assert (raised.value.code, raised.value.reason) == (403, "Forbidden")
    assert raised.value.message == f'admission webhook "vjob.kb.io" denied the request: {message}'


def test_the_webhook_lets_valid_and_unqueued_jobs_through() -> None:
    job_validation.validate_on_create("batch/v1/jobs", queued_job({tas.REQUIRED: RACK}))
    job_validation.validate_on_create("batch/v1/jobs", queued_job({tas.UNCONSTRAINED: "True"}))
    unqueued = queued_job({tas.REQUIRED: RACK, tas.PREFERRED: RACK})
    del unqueued["metadata"]["labels"]
    job_validation.validate_on_create("batch/v1/jobs", unqueued)
