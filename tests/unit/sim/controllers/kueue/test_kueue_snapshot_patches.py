"""The simulated Kueue's pure helpers: a snapshot in, the patches the manager would apply out.

Reservation as kubernetes-sigs/kueue ``pkg/scheduler/scheduler.go`` decides it, the workload
controller's steps (``pkg/controller/core/workload_controller.go``), the ProvisioningRequest check,
the Job and Pod integrations and queue status, each without a Store.
"""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from gang_sim.controllers.kueue import checks, integrations, lifecycle, queues, scheduler, starter
from gang_sim.controllers.kueue.lifecycle import Next
from gang_sim.controllers.kueue.patches import (
    AssumeUsage,
    Condition,
    CreateObject,
    DeleteControlled,
    PatchObject,
    RecordAdmission,
    RecordEvent,
    RequeueAt,
    WorkloadStatus,
)
from gang_sim.controllers.kueue.snapshot import (
    CheckSnapshot,
    IntegrationSnapshot,
    Owner,
    QueueSnapshot,
    ReservationSnapshot,
    WorkloadSnapshot,
)
from gang_sim.world.scenario import KueueSettings

NOW = 1000.0
WALL = datetime(2025, 1, 1, tzinfo=timezone.utc)
POD = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}
CHECK = {"spec": {"controllerName": checks.PROVISIONING_CONTROLLER, "parameters": {"name": "prc"}}}
PRC = {"metadata": {"name": "prc"}, "spec": {"provisioningClassName": "queued-provisioning.gke.io"}}
SETTINGS = KueueSettings(wait_for_pods_ready_timeout_seconds=300, requeue_base_seconds=60, requeue_limit=2)


def _config(gpus: str = "4", *, check: bool = False, selector: dict[str, Any] | None = None) -> QueueSnapshot:
    resources = [{"name": "cpu", "nominalQuota": "100"}, {"name": "nvidia.com/gpu", "nominalQuota": gpus}]
    spec: dict[str, Any] = {
        "namespaceSelector": {} if selector is None else selector,
        "resourceGroups": [
            {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "l4", "resources": resources}]}
        ],
    }
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    return QueueSnapshot(
        flavors={"l4": {"metadata": {"name": "l4"}, "spec": {"nodeLabels": {"pool": "l4"}}}},
        cluster_queues={"cq": {"metadata": {"name": "cq"}, "spec": spec}},
        local_queues={("default", "lq"): {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}},
        admission_checks={"prov": CHECK} if check else {},
        provisioning_configs={"prc": PRC},
    )


def _conditions(*items: tuple[str, str, str]) -> list[dict[str, Any]]:
    return [{"type": kind, "status": status, "reason": reason, "message": ""} for kind, status, reason in items]


def _workload(count: int = 4, *, min_count: int | None = None, **status: Any) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": count, "template": {"spec": POD}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-abcde",
            "namespace": "default",
            "uid": "wl-uid",
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": "job-uid", "controller": True}],
        },
        "spec": {"active": True, "queueName": "lq", "podSets": [pod_set]},
        "status": status,
    }


def _admitted(count: int = 4, **status: Any) -> dict[str, Any]:
    """A Workload holding quota for ``count`` pods in ``cq`` (admitted unless conditions say otherwise)."""
    assignment = {"name": "main", "count": count, "flavors": {"nvidia.com/gpu": "l4"}, "resourceUsage": {}}
    conditions = _conditions(("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted"))
    fields = {"conditions": conditions, "admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}
    return _workload(4, **{**fields, **status})


def _job(suspend: bool = False, **status: Any) -> dict[str, Any]:
    spec = {"suspend": suspend, "parallelism": 4, "template": {"metadata": {"labels": {"app": "x"}}, "spec": POD}}
    return {"metadata": {"name": "train", "namespace": "default"}, "spec": spec, "status": status}


def _reserve(workload: dict[str, Any], config: QueueSnapshot, **usage: int) -> list[Any]:
    used = {("cq", "l4", "nvidia.com/gpu"): Fraction(usage.get("gpus", 0))}
    return scheduler.reserve(ReservationSnapshot(workload, config, used, {"team": "ml"}, NOW, WALL))


def _snapshot(workload: dict[str, Any], owner: Owner | None = None, **timers: float) -> WorkloadSnapshot:
    return WorkloadSnapshot(workload, owner or Owner(job=_job()), SETTINGS, NOW, WALL, **timers)


def test_reservation_assumes_the_usage_then_writes_the_admission_with_pending_checks() -> None:
    workload = _workload(admissionChecks=[{"name": "prov", "state": "Retry", "retryCount": 2}])
    assume, write, event = _reserve(workload, _config(check=True))
    assert isinstance(assume, AssumeUsage) and assume.cluster_queue == "cq"
    assert isinstance(write, WorkloadStatus)
    # no Admitted condition until the checks are Ready (Kueue pkg/workload/admissionchecks.go SyncAdmittedCondition)
    assert write.conditions == (
        Condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
    )
    (assignment,) = write.fields["admission"]["podSetAssignments"]
    assert (assignment["count"], assignment["flavors"], assignment["resourceUsage"]["nvidia.com/gpu"]) == (
        4,
        {"cpu": "l4", "nvidia.com/gpu": "l4"},
        "4",
    )
    (entry,) = write.fields["admissionChecks"]
    pending = {"name": "prov", "state": "Pending", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    assert entry == {**pending, "retryCount": 2}  # kept: the next ProvisioningRequest is attempt 3
    assert event == RecordEvent("QuotaReserved", "Quota reserved in ClusterQueue cq")


def test_reservation_without_checks_admits_at_once_and_partially() -> None:
    evicted = _conditions(("Evicted", "True", "PodsReadyTimeout"))
    assume, admitted_at, write, _ = _reserve(_workload(6, min_count=2, conditions=evicted), _config(), gpus=1)
    assert admitted_at == RecordAdmission("wl-uid", NOW)
    assert write.fields["admission"]["podSetAssignments"][0]["count"] == 3  # the largest count that fits
    assert assume.pod_set_assignments == tuple(write.fields["admission"]["podSetAssignments"])
    assert [item.type for item in write.conditions] == ["QuotaReserved", "Evicted", "Admitted"]
    assert write.conditions[1] == Condition("Evicted", "False", "QuotaReserved", "Previously: evicted")
    assert write.conditions[2].status == "True"


def test_no_quota_is_waiting_or_exceeding_and_an_unchanged_reason_is_not_written_again() -> None:
    (waiting,) = _reserve(_workload(4), _config(), gpus=1)
    assert waiting.conditions[0][:3] == ("QuotaReserved", "False", "WaitingForQuota")
    (exceeding,) = _reserve(_workload(8), _config())
    assert exceeding.conditions[0][:3] == ("QuotaReserved", "False", "ExceedsMaxQuota")
    current = {"type": "QuotaReserved", "status": "False", "reason": exceeding.conditions[0].reason}
    current["message"] = exceeding.conditions[0].message
    assert _reserve(_workload(8, conditions=[current]), _config()) == []


def test_inadmissible_queues() -> None:
    (missing,) = _reserve({**_workload(), "spec": {**_workload()["spec"], "queueName": "other"}}, _config())
    assert missing.conditions == (
        Condition("QuotaReserved", "False", "Inadmissible", "LocalQueue other doesn't exist"),
    )
    (unselected,) = _reserve(_workload(), _config(selector={"matchLabels": {"team": "web"}}))
    assert unselected.conditions[0].message == "Workload namespace doesn't match ClusterQueue selector cq"
    config = _config(check=True)
    without_check = QueueSnapshot(config.flavors, config.cluster_queues, config.local_queues, {}, {})
    (inactive,) = _reserve(_workload(), without_check)
    assert inactive.conditions[0].message == "ClusterQueue cq is inactive: admission check prov not found"


def _check_snapshot(workload: dict[str, Any], requests: dict[str, Any] | None = None) -> CheckSnapshot:
    return CheckSnapshot(workload, _config(check=True), requests or {}, WALL)


def test_a_missing_request_is_created_after_its_pod_templates_and_the_check_stays_pending() -> None:
    workload = _admitted(conditions=_conditions(("QuotaReserved", "True", "QuotaReserved")))
    workload["status"]["admissionChecks"] = [{"name": "prov", "state": "Pending", "message": ""}]
    result = checks.sync_checks(_check_snapshot(workload))
    template, request = result.patches  # no status write: the entry did not change
    assert isinstance(template, CreateObject) and template.exists_ok
    assert template.body["metadata"]["name"] == "ppt-job-train-abcde-prov-1-main"
    assert template.body["template"]["spec"]["nodeSelector"] == {"pool": "l4"}
    assert isinstance(request, CreateObject) and not request.exists_ok
    pod_sets = request.body["spec"]["podSets"]
    assert pod_sets == [{"podTemplateRef": {"name": template.body["metadata"]["name"]}, "count": 4}]
    assert result.states == workload["status"]["admissionChecks"]


def test_a_failed_request_turns_the_check_retry_and_unadmits_in_the_same_write() -> None:
    workload = _admitted(admissionChecks=[{"name": "prov", "state": "Ready", "message": "ok"}])
    failed = {
        "metadata": {"name": "job-train-abcde-prov-1"},
        "status": {"conditions": [{"type": "Failed", "status": "True", "message": "boom"}]},
    }
    result = checks.sync_checks(_check_snapshot(workload, {"job-train-abcde-prov-1": failed}))
    (write,) = result.patches
    assert write.conditions == (
        Condition("Admitted", "False", "UnsatisfiedAdmissionChecks", checks.UNSATISFIED_CHECKS),
    )
    (state,) = write.fields["admissionChecks"]
    assert (state["state"], state["retryCount"], state["requeueAfterSeconds"]) == ("Retry", 1, 60)
    assert state["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    assert result.states == write.fields["admissionChecks"]


def test_settle_before_the_checks() -> None:
    assert lifecycle.settle(
        _snapshot(_workload(), Owner(job=_job(conditions=_conditions(("Complete", "True", "CompletionsReached")))))
    ).patches == [WorkloadStatus((Condition("Finished", "True", "Succeeded", "Job finished successfully"),))]
    backoff = _workload(conditions=_conditions(("Evicted", "True", "PodsReadyTimeout"), ("Requeued", "False", "x")))
    assert lifecycle.settle(_snapshot(backoff, requeue_at=NOW + 5)) == lifecycle.Step(wake=NOW + 5)
    (requeued,) = lifecycle.settle(_snapshot(backoff, requeue_at=NOW)).patches
    assert requeued.conditions[0][:3] == ("Requeued", "True", "BackoffFinished")
    assert lifecycle.settle(_snapshot(_workload())).next is Next.RESERVE
    assert lifecycle.settle(_snapshot(_admitted())).next is Next.CHECK


def test_a_workload_not_admitted_waits_for_start_before_any_quota() -> None:
    """Kueue ``jobframework/reconciler.go`` ``generatePodsReadyCondition``: not admitted -> WaitForStart."""
    assert lifecycle.wait_for_start(_snapshot(_workload())).patches == [WorkloadStatus((lifecycle.WAIT_FOR_START,))]
    waiting = _workload(conditions=_conditions(("PodsReady", "False", "WaitForStart")))
    assert lifecycle.wait_for_start(_snapshot(waiting)) == lifecycle.Step()
    assert lifecycle.wait_for_start(_snapshot(_admitted())) == lifecycle.Step()
    complete = Owner(job=_job(conditions=_conditions(("Complete", "True", "CompletionsReached"))))
    assert lifecycle.wait_for_start(_snapshot(_workload(), complete)) == lifecycle.Step()


def test_a_deactivated_workload_holding_quota_is_evicted_without_requeue() -> None:
    workload = _admitted(admissionChecks=[{"name": "prov", "state": "Ready", "podSetUpdates": [{"name": "main"}]}])
    workload["spec"]["active"] = False
    patches = lifecycle.settle(_snapshot(workload, Owner(job=_job()))).patches
    assert [type(item).__name__ for item in patches] == [
        "PatchObject",
        "PatchObject",
        "PatchObject",  # the Job suspended, its template restored, startTime cleared
        "DeleteControlled",
        "DeleteControlled",
        "RecordAdmission",
        "WorkloadStatus",
        "RecordEvent",
    ]
    assert patches[0] == PatchObject("batch/v1/jobs", "train", {"spec": {"suspend": True}}, namespace="default")
    assert patches[3] == DeleteControlled("autoscaling.x-k8s.io/v1/provisioningrequests", "default", "wl-uid")
    write = patches[6]
    assert [item[:3] for item in write.conditions] == [
        ("Evicted", "True", "Deactivated"),
        ("QuotaReserved", "False", "Deactivated"),
        ("Admitted", "False", "NoReservation"),
    ]
    assert write.fields == {"admission": None, "admissionChecks": [{"name": "prov", "state": "Pending"}]}
    assert patches[7] == RecordEvent("EvictedDueToDeactivated", "The workload is deactivated", warning=True)


def test_judge_the_check_states() -> None:
    workload = _admitted(conditions=_conditions(("QuotaReserved", "True", "QuotaReserved")))
    rejected = lifecycle.judge(_snapshot(workload), [{"state": "Rejected"}, {"state": "Ready"}])
    assert rejected.patches[0] == WorkloadStatus(
        (Condition("DeactivationTarget", "True", "AdmissionCheck", "At least one admission check is rejected"),)
    )
    assert rejected.patches[1] == PatchObject(
        "kueue.x-k8s.io/v1beta2/workloads", "job-train-abcde", {"spec": {"active": False}}, namespace="default"
    )
    assert rejected.patches[2].reason == "AdmissionCheckRejected"
    retry = lifecycle.judge(_snapshot(workload), [{"state": "Retry", "requeueAfterSeconds": 120}])
    assert retry.wake == NOW + 120 and RequeueAt("wl-uid", NOW + 120) in retry.patches
    assert lifecycle.judge(_snapshot(workload), [{"state": "Pending"}]) == lifecycle.Step()
    ready = lifecycle.judge(_snapshot(workload), [{"state": "Ready"}])
    assert (ready.next, ready.reread) == (Next.RUN, True)
    assert ready.patches[1:] == [RecordAdmission("wl-uid", NOW), RecordEvent("Admitted", "Admitted by ClusterQueue cq")]


def test_wait_for_pods_ready_times_out_with_exponential_requeue_then_deactivates() -> None:
    running = Owner(job=_job(ready=2))
    first = lifecycle.wait_for_pods_ready(_snapshot(_admitted(), running))
    assert first.patches == [
        WorkloadStatus((lifecycle.WAIT_FOR_START,)),
        RecordAdmission("wl-uid", NOW),
    ]
    assert first.wake == NOW + 300
    waiting = _admitted(
        conditions=[*_admitted()["status"]["conditions"], *_conditions(("PodsReady", "False", "WaitForStart"))],
        requeueState={"count": 1},
    )
    timed_out = lifecycle.wait_for_pods_ready(_snapshot(waiting, running, admitted_at=NOW - 300))
    assert timed_out.wake == NOW + 120  # requeueBase * 2^(2-1)
    write = next(item for item in timed_out.patches if isinstance(item, WorkloadStatus))
    assert write.fields["requeueState"] == {"requeueAt": "2025-01-01T00:02:00Z", "count": 2}
    assert Condition("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded") in write.conditions
    waiting["status"]["requeueState"] = {"count": 2}
    beyond = lifecycle.wait_for_pods_ready(_snapshot(waiting, running, admitted_at=NOW - 300))
    assert beyond.patches[0].conditions[0][:3] == ("DeactivationTarget", "True", "RequeuingLimitExceeded")
    started = lifecycle.wait_for_pods_ready(_snapshot(_admitted(), Owner(job=_job(ready=3, succeeded=1))))
    assert started.patches[0].conditions[0][:3] == ("PodsReady", "True", "Started")


def test_start_a_partially_admitted_job_and_stop_it() -> None:
    workload = _admitted(2)
    (resume,) = starter.start(workload, Owner(job=_job(suspend=True)), _config().flavors)
    spec = resume.body["spec"]
    assert (spec["suspend"], spec["parallelism"]) == (False, 2)
    assert spec["template"]["spec"]["nodeSelector"] == {"pool": "l4"}
    # Kueue's start labels the pods with their podSet and queues and names the Workload (getPodSetsInfoFromStatus)
    assert spec["template"]["metadata"]["labels"] == {
        "app": "x",
        "kueue.x-k8s.io/podset": "main",
        "kueue.x-k8s.io/local-queue-name": "lq",
        "kueue.x-k8s.io/cluster-queue-name": "cq",
    }
    assert spec["template"]["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    assert "schedulingGates" not in spec["template"]["spec"]  # no topology assignment, no topology gate
    assert starter.start(workload, Owner(job=_job(suspend=False)), _config().flavors) == []
    suspend, restore, start_time = starter.stop(workload, Owner(job=_job()))
    assert suspend.body == {"spec": {"suspend": True}}
    assert restore.body["spec"]["parallelism"] == 4
    assert start_time == PatchObject(
        "batch/v1/jobs", "train", {"status": {"startTime": None}}, namespace="default", subresource="status"
    )


def _group_pod(name: str, phase: str = "Pending") -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/pod-group-name": "g"}
    metadata = {
        "name": name,
        "namespace": "default",
        "uid": f"{name}-uid",
        "labels": labels,
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
        "resourceVersion": "7",
        "finalizers": ["kueue.x-k8s.io/managed"],
    }
    return {"metadata": metadata, "spec": POD, "status": {"phase": phase}}


def test_start_a_pod_group_ungates_only_gated_pods() -> None:
    workload = _admitted(2)
    workload["metadata"]["annotations"] = {"kueue.x-k8s.io/is-group-workload": "true"}
    gated = _group_pod("g-0")
    gated["spec"] = {**POD, "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": "other"}]}
    (ungate,) = starter.start(workload, Owner(pods=(gated, _group_pod("g-1"))), _config().flavors)
    assert (ungate.resource, ungate.name) == ("v1/pods", "g-0")
    assert ungate.body["spec"] == {"schedulingGates": [{"name": "other"}], "nodeSelector": {"pool": "l4"}}


def test_a_pod_group_gets_its_workload_once_complete_and_its_members_are_adopted() -> None:
    (short,) = integrations.workload_creations(IntegrationSnapshot((), (), (_group_pod("g-0"),)))
    (event,) = short.plan()
    assert event == RecordEvent(
        "ErrWorkloadCompose",
        "'g' group has fewer runnable pods than expected",
        warning=True,
        once_key=("default", "g", "1"),
    )
    pods = (_group_pod("g-1"), _group_pod("g-0"))
    (complete,) = integrations.workload_creations(IntegrationSnapshot((), (), pods))
    (create,) = complete.plan()
    assert isinstance(create, CreateObject) and create.body["metadata"]["name"] == "g"
    assert [pod["metadata"]["name"] for pod in create.adopters] == ["g-0", "g-1"]
    existing = ({"metadata": {"name": "g", "namespace": "default"}},)
    assert integrations.workload_creations(IntegrationSnapshot(existing, (), pods)) == []


def test_finalizers_go_when_the_group_finished() -> None:
    pods = [_group_pod("g-0", "Succeeded"), _group_pod("g-1", "Running")]
    assert integrations.finalizer_releases(pods, set()) == []
    (release,) = integrations.finalizer_releases(pods, {("default", "g")})
    assert release.plan() == [
        PatchObject("v1/pods", "g-0", {"metadata": {"finalizers": None, "resourceVersion": "7"}}, namespace="default")
    ]


def test_queue_status_and_check_activity() -> None:
    config = _config(check=True)
    missing_config = QueueSnapshot(config.flavors, config.cluster_queues, config.local_queues, {"prov": CHECK}, {})
    (inactive,) = queues.check_activity(missing_config)
    assert inactive.body["status"]["conditions"][0]["reason"] == "BadParametersRef"
    batches = queues.status_batches(config, [_admitted(), _workload()])
    cluster_queue, local_queue = (batch.plan()[0] for batch in batches)
    assert (cluster_queue.resource, cluster_queue.subresource) == ("kueue.x-k8s.io/v1beta2/clusterqueues", "status")
    counts = {key: cluster_queue.body["status"][key] for key in ("pendingWorkloads", "admittedWorkloads")}
    assert counts == {"pendingWorkloads": 1, "admittedWorkloads": 1}
    assert local_queue.namespace == "default" and local_queue.body["status"]["reservingWorkloads"] == 1
