"""``workload`` mode in the reservation core: the PodGroup manifest, its members, and ``decide()``
reading the PodGroup's status and the members' binding (``reservation.pod_group``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import decision, manifests, shape
from airflow_provider_gang.reservation.decision import Observed, Stage
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.pod_group import PodGroupState, classify
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, gang_spec, member
from tests.unit.reservation.observations import NO_LIMIT

OWNER_UID = "uid-owner"


def pod_group(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    """The gang's PodGroup with ``(type, status, reason, message)`` conditions."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang-t1-abc", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "reason": reason, "message": message}
                for kind, status, reason, message in conditions
            ]
        },
    }


UNSCHEDULABLE = ("PodGroupInitiallyScheduled", "False", "Unschedulable", "0/3 nodes are available: 3 Insufficient gpu")
SCHEDULER_ERROR = ("PodGroupInitiallyScheduled", "False", "SchedulerError", "bad node affinity")
SCHEDULED = ("PodGroupInitiallyScheduled", "True", "Scheduled", "")
PREEMPTED = ("DisruptionTarget", "True", "PreemptionByScheduler", "preempted by a higher priority group")


def observed(group: dict[str, Any] | None, pods: Any, *, stage: Stage = Stage.RESERVATION) -> Observed:
    return Observed(
        mode=ReservationMode.WORKLOAD,
        stage=stage,
        size=3,
        started_at=T0,
        pod_group=group,
        pods=[pod.obj() for pod in pods],
    )


def bound(size: int = 3) -> list[Any]:
    return [member(rank).bound() for rank in range(size)]


def pending(size: int = 3) -> list[Any]:
    return [member(rank) for rank in range(size)]


def test_the_pod_group_is_named_like_the_gang_owned_by_the_owner_and_a_gang_of_all_members() -> None:
    spec = gang_spec(mode="workload", size=4, min_size=2)
    group = manifests.pod_group.pod_group(spec, owner_uid=OWNER_UID)
    assert (group["apiVersion"], group["kind"], group["metadata"]["name"]) == (
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        "gang-t1-abc",
    )
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 4}}}
    assert [reference["uid"] for reference in group["metadata"]["ownerReferences"]] == [OWNER_UID]
    assert group["metadata"]["labels"]["airflow-gang.io/role"] == "reservation"


def test_members_are_linked_to_the_pod_group_and_consume_no_provisioning_request() -> None:
    spec = gang_spec(mode="workload")
    pod = manifests.pod_group.member_pod(spec, 2, owner_uid=OWNER_UID)
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "gang-t1-abc"}
    assert pod["metadata"]["name"] == "gang-t1-abc-2"
    assert not pod["spec"].get("schedulingGates")
    assert not any("provisioning" in key for key in (pod["metadata"].get("annotations") or {}))


@pytest.mark.parametrize("mode", ["provisioning_request", "gates", "kueue"])
def test_other_modes_have_no_pod_group(mode: str) -> None:
    spec = gang_spec(mode=mode)
    with pytest.raises(ValueError, match="reservation='workload'"):
        manifests.pod_group.pod_group(spec, owner_uid=OWNER_UID)
    with pytest.raises(ValueError, match="reservation='workload'"):
        manifests.pod_group.member_pod(spec, 0, owner_uid=OWNER_UID)


def test_a_provisioning_class_is_refused_in_workload_mode() -> None:
    with pytest.raises(GangSpecError, match=r"provisioning_class.*creates no ProvisioningRequest"):
        gang_spec(mode="workload", provisioning_class="check-capacity.autoscaling.x-k8s.io")
    with pytest.raises(GangSpecError, match="provisioning_parameters"):
        gang_spec(mode="workload", provisioning_parameters={"a": "b"})


CLASSIFY_CASES = [
    ("gone", None, bound(), PodGroupState.GONE),
    ("preempted outranks bound", pod_group(SCHEDULED, PREEMPTED), bound(), PodGroupState.PREEMPTED),
    ("a rank missing", pod_group(), bound(2), PodGroupState.MISSING_MEMBERS),
    ("a rank terminating", pod_group(), [*bound(2), member(2).terminating()], PodGroupState.MISSING_MEMBERS),
    ("all bound", pod_group(SCHEDULED), bound(), PodGroupState.BOUND),
    ("bound before the condition is written", pod_group(), bound(), PodGroupState.BOUND),
    ("scheduled, binding", pod_group(SCHEDULED), [*bound(2), member(2)], PodGroupState.BINDING),
    ("unschedulable", pod_group(UNSCHEDULABLE), pending(), PodGroupState.UNSCHEDULABLE),
    ("scheduler error", pod_group(SCHEDULER_ERROR), pending(), PodGroupState.SCHEDULER_ERROR),
    ("not tried yet", pod_group(), pending(), PodGroupState.WAITING),
]


@pytest.mark.parametrize(
    ("group", "pods", "expected"), [case[1:] for case in CLASSIFY_CASES], ids=[c[0] for c in CLASSIFY_CASES]
)
def test_classify(group: Any, pods: Any, expected: PodGroupState) -> None:
    assert classify(group, [pod.obj() for pod in pods], size=3) is expected


RESERVATION_CASES = [
    (pod_group(SCHEDULED), bound(), Phase.RESERVED, Reason.RESERVED, "every member bound together"),
    (None, bound(), Phase.FAILED, Reason.RESERVATION_GONE, "PodGroup of the gang was deleted"),
    (pod_group(PREEMPTED), pending(), Phase.FAILED, Reason.PREEMPTED, "preempted by a higher priority group"),
    (pod_group(), bound(2), Phase.FAILED, Reason.MEMBER_LOST, "rank(s) [2] missing"),
    (
        pod_group(UNSCHEDULABLE),
        pending(),
        Phase.PENDING,
        Reason.WAITING_FOR_CAPACITY,
        "0 of 3 members bound (Unschedulable: 0/3 nodes are available",
    ),
    (pod_group(SCHEDULER_ERROR), pending(), Phase.PENDING, Reason.WAITING_FOR_CAPACITY, "bad node affinity"),
    (pod_group(SCHEDULED), [*bound(2), member(2)], Phase.PENDING, Reason.WAITING_FOR_CAPACITY, "2 of 3 members"),
    (pod_group(), pending(), Phase.PENDING, Reason.NOT_HANDLED_YET, "not tried by the scheduler yet"),
]


@pytest.mark.parametrize(("group", "pods", "phase", "reason", "words"), RESERVATION_CASES)
def test_reservation_decision(group: Any, pods: Any, phase: Phase, reason: Reason, words: str) -> None:
    result = decision.decide(observed(group, pods), now=T0 + 10, policy=NO_LIMIT)
    assert (result.phase, result.reason) == (phase, reason), result.message
    assert result.terminal is (phase is not Phase.PENDING)
    assert words in result.message
    assert result.admitted_count == (3 if phase is Phase.RESERVED else None)


def test_an_unschedulable_gang_ends_at_the_deadline_with_the_schedulers_words() -> None:
    policy = decision.Policy(deadline=T0 + 60)
    result = decision.decide(observed(pod_group(UNSCHEDULABLE), pending()), now=T0 + 60, policy=policy)
    assert (result.phase, result.reason) == (Phase.FAILED, Reason.DEADLINE)
    assert "Insufficient gpu" in result.message


@pytest.mark.parametrize(
    ("group", "reason"),
    [
        (pod_group(SCHEDULED, PREEMPTED), Reason.PREEMPTED),
        (pod_group(SCHEDULED), Reason.MEMBERS_RUNNING),
        (None, Reason.MEMBERS_RUNNING),
    ],
    ids=["preempted", "scheduled", "pod group deleted"],
)
def test_run_stage_ends_only_when_the_group_is_preempted(group: Any, reason: Reason) -> None:
    running = [member(rank).running() for rank in range(3)]
    result = decision.decide(observed(group, running, stage=Stage.RUN), now=T0 + 10, policy=NO_LIMIT)
    assert result.reason is reason, result.message


def test_a_pod_group_of_the_wrong_shape_is_named() -> None:
    group = pod_group()
    group["spec"]["schedulingPolicy"] = "gang"
    problem = shape.malformed_in(observed(group, pending()))
    assert problem == "PodGroup ml/gang-t1-abc: spec.schedulingPolicy is a string, not an object"
