"""Kueue's pure decisions, table-tested: flavor assignment with borrowing and partial admission,
admission-check states from ProvisioningRequest conditions, naming, webhook mutations."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gang_sim.controllers.kueue import checks, queues, quota, workloads
from tests.builders import GPU_TAINT, GPU_TOLERATION, pod_spec


def cluster_queue(
    name: str,
    gpus: str,
    *,
    cohort: str | None = None,
    borrowing_limit: str | None = None,
    flavors: tuple[str, ...] = ("l4",),
) -> dict[str, Any]:
    """A ClusterQueue ``name`` with ``gpus`` GPUs of nominal quota in each of ``flavors`` (also used by
    ``test_kueue_pending``)."""
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "100"},
                            {"name": "memory", "nominalQuota": "1Ti"},
                            gpu,
                        ],
                    }
                    for flavor in flavors
                ],
            }
        ]
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


FLAVORS = {
    "l4": {"metadata": {"name": "l4"}, "spec": {"nodeLabels": {"pool": "l4"}}},
    "a100": {"metadata": {"name": "a100"}, "spec": {"nodeLabels": {"pool": "a100"}, "nodeTaints": [GPU_TAINT]}},
}
GPU_POD = pod_spec(gpus=1)


def pod_set_request(count: int, minimum: int | None = None, spec: dict[str, Any] | None = None) -> quota.PodSetRequest:
    """The pod set ``main`` of ``count`` pods (at least ``minimum`` with partial admission)."""
    return quota.PodSetRequest("main", count, spec or GPU_POD, minimum)


@pytest.mark.parametrize(
    ("count", "minimum", "usage", "expected"),
    [
        pytest.param(4, None, {}, 4, id="fits"),
        pytest.param(5, None, {}, None, id="over-quota"),
        pytest.param(4, None, {("cq", "l4", "nvidia.com/gpu"): Fraction(1)}, None, id="used-by-others"),
        pytest.param(6, 2, {}, 4, id="partial-admission-largest-fitting"),
        pytest.param(6, 5, {}, None, id="partial-admission-below-minimum"),
    ],
)
def test_assign_single_queue(count: int, minimum: int | None, usage: quota.Usage, expected: int | None) -> None:
    queue = cluster_queue("cq", "4")
    result = quota.assign([pod_set_request(count, minimum)], queue, [queue], FLAVORS, usage)
    assert (None if result is None else result[0].count) == expected


def test_assign_records_flavor_and_usage() -> None:
    queue = cluster_queue("cq", "4")
    (assignment,) = quota.assign([pod_set_request(2)], queue, [queue], FLAVORS, {}) or []
    assert assignment.flavors == {"cpu": "l4", "memory": "l4", "nvidia.com/gpu": "l4"}
    assert assignment.usage["nvidia.com/gpu"] == 2


@pytest.mark.parametrize(
    ("borrowing_limit", "other_usage", "count", "fits"),
    [
        pytest.param(None, 0, 8, True, id="borrow-whole-unused-neighbour"),
        pytest.param(None, 3, 8, False, id="neighbour-busy"),
        pytest.param("2", 0, 6, True, id="within-borrowing-limit"),
        pytest.param("2", 0, 7, False, id="beyond-borrowing-limit"),
    ],
)
def test_cohort_borrowing(borrowing_limit: str | None, other_usage: int, count: int, fits: bool) -> None:
    mine = cluster_queue("mine", "4", cohort="team", borrowing_limit=borrowing_limit)
    other = cluster_queue("other", "4", cohort="team")
    usage = {("other", "l4", "nvidia.com/gpu"): Fraction(other_usage)}
    assert (quota.assign([pod_set_request(count)], mine, [mine, other], FLAVORS, usage) is not None) is fits


def test_flavors_are_tried_in_order_and_skip_mismatching_nodes() -> None:
    queue = cluster_queue("cq", "4", flavors=("a100", "l4"))
    (untolerated,) = quota.assign([pod_set_request(1)], queue, [queue], FLAVORS, {}) or []
    assert untolerated.flavors["nvidia.com/gpu"] == "l4"  # a100's taint is not tolerated
    tolerating = pod_spec(gpus=1, tolerations=[GPU_TOLERATION])
    (tolerated,) = quota.assign([pod_set_request(1, spec=tolerating)], queue, [queue], FLAVORS, {}) or []
    assert tolerated.flavors["nvidia.com/gpu"] == "a100"
    pinned = pod_spec(gpus=1, tolerations=[GPU_TOLERATION], nodeSelector={"pool": "l4"})
    (selected,) = quota.assign([pod_set_request(1, spec=pinned)], queue, [queue], FLAVORS, {}) or []
    assert selected.flavors["nvidia.com/gpu"] == "l4"


def _pr(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "wl-prov-1"},
        "spec": {"provisioningClassName": "queued-provisioning.gke.io"},
        "status": {
            "conditions": [{"type": t, "status": s, "message": m} for t, s, m in conditions],
            "provisioningClassDetails": {"ResizeRequestName": "resize-1"},
        },
    }


CONFIG = {
    "spec": {
        "retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 60, "backoffMaxSeconds": 100},
        "podSetUpdates": {
            "nodeSelector": [
                {
                    "key": "autoscaling.gke.io/provisioning-request",
                    "valueFromProvisioningClassDetail": "ResizeRequestName",
                }
            ]
        },
    }
}


@pytest.mark.parametrize(
    ("request_conditions", "attempt", "admitted", "state", "extra"),
    [
        pytest.param(None, 1, False, "Pending", {}, id="not-created"),
        pytest.param((), 1, False, "Pending", {}, id="no-conditions"),
        pytest.param(
            (("Accepted", "True", ""), ("Provisioned", "False", "ETA 5m")),
            1,
            False,
            "Pending",
            {"message": "ETA 5m"},
            id="accepted-eta",
        ),
        pytest.param(
            (("Failed", "True", "boom"),),
            1,
            False,
            "Retry",
            {"retryCount": 1, "requeueAfterSeconds": 60, "message": "Retrying after failure: boom"},
            id="retry-1",
        ),
        pytest.param((("Failed", "True", "boom"),), 2, False, "Retry", {"requeueAfterSeconds": 100}, id="retry-capped"),
        pytest.param((("Failed", "True", "boom"),), 3, False, "Rejected", {}, id="beyond-limit"),
        pytest.param(
            (("Provisioned", "True", "ok"), ("BookingExpired", "True", "late")),
            1,
            False,
            "Retry",
            {},
            id="booking-expired-before-admission",
        ),
        pytest.param(
            (("Provisioned", "True", "ok"), ("BookingExpired", "True", "late")),
            1,
            True,
            "Ready",
            {},
            id="booking-expired-after-admission-ignored",
        ),
        pytest.param(
            (("Provisioned", "True", "ok"), ("CapacityRevoked", "True", "gone")), 1, True, "Rejected", {}, id="revoked"
        ),
    ],
)
def test_check_state(
    request_conditions: tuple[tuple[str, str, str], ...] | None,
    attempt: int,
    admitted: bool,
    state: str,
    extra: dict[str, Any],
) -> None:
    request = None if request_conditions is None else _pr(*request_conditions)
    result = checks.check_state(request, CONFIG, attempt, admitted=admitted, pod_set_names=["main"])
    assert result["state"] == state
    assert {key: result[key] for key in extra} == extra


def test_ready_check_carries_consume_annotations_and_node_selector() -> None:
    result = checks.check_state(_pr(("Provisioned", "True", "ok")), CONFIG, 1, admitted=False, pod_set_names=["main"])
    assert result["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1",
                "autoscaling.x-k8s.io/provisioning-class-name": "queued-provisioning.gke.io",
            },
            "nodeSelector": {"autoscaling.gke.io/provisioning-request": "resize-1"},
        }
    ]


def test_names_follow_upstream_formats() -> None:
    name = workloads.workload_name("Job", "batch", "my-job", "uid-1")
    assert name.startswith("job-my-job-") and len(name) == len("job-my-job-") + 5
    assert name == workloads.workload_name("Job", "batch", "my-job", "uid-1")
    assert name != workloads.workload_name("Job", "batch", "my-job", "uid-2")
    assert checks.request_name("wl", "prov", 3) == "wl-prov-3"
    long_name = checks.request_name("w" * 250, "prov", 1)
    assert len(long_name) == 253 and long_name[247] == "-"
    assert checks.template_name("wl-prov-1", "main") == "ppt-wl-prov-1-main"


def test_webhook_suspends_queued_jobs_and_gates_group_pods() -> None:
    job: dict[str, Any] = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": {}}
    workloads.mutate_on_create("batch/v1/jobs", job)
    assert job["spec"]["suspend"] is True
    unmanaged: dict[str, Any] = {"metadata": {}, "spec": {}}
    workloads.mutate_on_create("batch/v1/jobs", unmanaged)
    assert "suspend" not in unmanaged["spec"]
    pod = {
        "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": "g"}},
        "spec": pod_spec(),
    }
    workloads.mutate_on_create("v1/pods", pod)
    # Kueue 0.17 with TAS on gates every managed pod twice; starting it removes the topology gate
    # unless its admission has a topology assignment (pkg/controller/jobs/pod/pod_webhook.go).
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}]
    assert pod["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert len(pod["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]) == 8


def test_min_parallelism_must_be_below_the_pod_count() -> None:
    job = {
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"kueue.x-k8s.io/job-min-parallelism": "4"},
        },
        "spec": {"parallelism": 4, "template": {"spec": pod_spec()}},
    }
    with pytest.raises(ValueError, match="job-min-parallelism"):
        workloads.job_workload(job)


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        pytest.param(None, {}, False, id="null-selects-nothing"),
        pytest.param({}, {"team": "a"}, True, id="empty-selects-all"),
        pytest.param({"matchLabels": {"team": "ml"}}, {"team": "ml"}, True, id="match-labels"),
        pytest.param({"matchLabels": {"team": "ml"}}, {"team": "web"}, False, id="match-labels-miss"),
        pytest.param(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "ai"]}]},
            {"team": "ai"},
            True,
            id="expression-in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            {"tier": "x"},
            False,
            id="expression-does-not-exist",
        ),
    ],
)
def test_namespace_selector(selector: dict[str, Any] | None, labels: dict[str, str], selected: bool) -> None:
    queue: dict[str, Any] = {"spec": {} if selector is None else {"namespaceSelector": selector}}
    assert queues.namespace_selected(queue, labels) is selected


def test_webhook_leaves_pods_of_a_controller_alone() -> None:
    pod: dict[str, Any] = {
        "metadata": {
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "u", "controller": True}],
        },
        "spec": pod_spec(),
    }
    workloads.mutate_on_create("v1/pods", pod)
    assert "schedulingGates" not in pod["spec"]
