"""One example of every record, as the golden files in ``golden/`` hold them (version 1)."""

from __future__ import annotations

from dataclasses import replace

from airflow_provider_gang.reservation.checkpoint import Checkpoint, CheckpointReport
from airflow_provider_gang.reservation.fallback import OtherZone, RetryAsIs, ShrinkTo
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records.events import ApiRefusal, EventTimings, GangEvent
from airflow_provider_gang.reservation.records.tries import (
    MultiKueueDispatch,
    ReservedObject,
    TryPlan,
    TryRecord,
    TryState,
)
from airflow_provider_gang.reservation.records.triggers import DeleteTarget, TriggerArguments
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.topology.labels import SUBBLOCK
from airflow_provider_gang.reservation.topology.pins import Placement
from airflow_provider_gang.reservation.unread_reports import ReportGap, UnreadReport
from tests.builders import gang_spec

GANG = "nightly-train-t2-5f3a"
UNREAD = UnreadReport(
    rank=3, gap=ReportGap.NOT_SEEN_STOPPED, detail="waited 45 s: the longest grace period 30 s + 15 s"
)
LADDER = (RetryAsIs(times=2), OtherZone("europe-west4-b"), ShrinkTo(2))
ROOM_NOTE = "rack-b1 holds the 2 members (room: rack-b1 6, rack-a2 3, rack-a1 2)"

RUN_EVENT = GangEvent(
    stage=Stage.RUN,
    gang_name=GANG,
    namespace="ml",
    mode=ReservationMode.PROVISIONING_REQUEST,
    phase=Phase.FAILED,
    terminal=True,
    reason=Reason.MEMBER_FAILED,
    message="rank 1 (nightly-train-t2-5f3a-1) failed, exit code 137, OOMKilled",
    admitted_count=None,
    members=(
        MemberStatus(0, MemberState.RUNNING, f"{GANG}-0", "node-a", started_at=1_800_000_100.0),
        MemberStatus(
            1,
            MemberState.FAILED,
            f"{GANG}-1",
            "node-b",
            exit_code=137,
            reason="OOMKilled",
            started_at=1_800_000_100.0,
            finished_at=1_800_000_700.0,
        ),
    ),
    api_error=None,
    timings=EventTimings(
        started_at=1_800_000_060.0,
        event_at=1_800_000_700.5,
        waited_seconds=640.5,
        phases={"starting": 1_800_000_060.0, "running": 1_800_000_100.0, "failed": 1_800_000_700.5},
    ),
    checkpoint=CheckpointReport(step=400, progress=450, pod=f"{GANG}-0", rank=0),
    logs=((0, "step 449 loss 0.21\nSIGTERM: saving a checkpoint\n"),),
    unread_reports=(UNREAD,),
)

REFUSED_EVENT = GangEvent(
    stage=Stage.RESERVATION,
    gang_name=GANG,
    namespace="ml",
    mode=ReservationMode.KUEUE,
    phase=Phase.FAILED,
    terminal=True,
    reason=Reason.INVALID,
    message="the API server refused: 403 Forbidden",
    api_error=ApiRefusal(type="Forbidden", code=403),
    timings=EventTimings(started_at=1_800_000_000.0, event_at=1_800_000_001.0, waited_seconds=1.0),
)

PLAN = TryPlan(
    attempt=2,
    gang=GANG,
    step="retry as-is (up to 2 times)",
    step_index=0,
    spec=gang_spec(
        name=GANG,
        size=2,
        zone="europe-west4-a",
        checkpoint=Checkpoint("gs://bucket/nightly/scheduled__1", try_number=2, resume_step=400),
        required_topology=SUBBLOCK,
        placement=Placement(SUBBLOCK, ("rack-b1",), note=ROOM_NOTE),
    ),
    requested_at=1_800_000_000.0,
    reservation_deadline=1_800_001_800.0,
    deadline_reason=Reason.DEADLINE,
    start_deadline=None,
    adopted_from=None,
    ladder=LADDER,
    kubernetes_conn_id="gpu_cluster_b",
    repeats=True,
)

STATE = TryState(
    plan=PLAN,
    owner_uid="0b6c5e0e-6f0a-4a57-9d0e-1f2a3b4c5d6e",
    job_uid=None,
    objects=(
        ReservedObject("v1/configmaps", f"{GANG}-owner", "0b6c5e0e-6f0a-4a57-9d0e-1f2a3b4c5d6e"),
        ReservedObject("autoscaling.x-k8s.io/v1/provisioningrequests", GANG, "7d1f0c2a-0000-4000-8000-000000000001"),
    ),
    reservation_event=GangEvent(
        stage=Stage.RESERVATION,
        gang_name=GANG,
        namespace="ml",
        mode=ReservationMode.PROVISIONING_REQUEST,
        phase=Phase.RESERVED,
        terminal=True,
        reason=Reason.RESERVED,
        message="ProvisioningRequest provisioned",
        timings=EventTimings(1_800_000_000.0, 1_800_000_055.0, 55.0, {"pending": 1_800_000_000.0}),
    ),
    launched_at=1_800_000_060.0,
    size_run=2,
    teardown_started_at=1_800_000_702.5,
    topology_note=ROOM_NOTE,
)

RECORD = TryRecord(
    attempt=2,
    gang=GANG,
    step="retry as-is (up to 2 times)",
    step_index=0,
    mode="provisioning_request",
    size=2,
    outcome="member_exit_retryable",
    message="rank 1 exited 137 (retry_on_exit_codes); rank 1 failed",
    retryable=True,
    queue_seconds=55.0,
    provisioning_seconds=40.0,
    run_seconds=600.5,
    gpu_seconds_reserved=1401.0,
    gpu_seconds_used=1201.0,
    gpu_seconds_idle=200.0,
    exit_codes={"1": 137},
    ladder=LADDER,
    adopted_from=1,
    checkpoint_step=400,
    checkpoint_progress=450,
    resumed_from_step=None,
    gpu_seconds_lost=120.0,
    gpu_seconds_saved=1081.0,
    exit_code_decision={"rank": 1, "exit_code": 137, "rule": "retry_on_exit_codes", "reason": "member_exit_retryable"},
    kubernetes_conn_id="gpu_cluster_b",
    namespace="ml",
    repeated=True,
    node_reclaimed=False,
    requested_at=1_800_000_000.0,
    start_deadline=1_800_003_600.0,
    zone="europe-west4-a",
    queue=None,
    provisioning_class="check-capacity.autoscaling.x-k8s.io",
    teardown_started_at=1_800_000_702.5,
    teardown_ended_at=1_800_000_704.0,
    required_topology=SUBBLOCK,
    topology_note=ROOM_NOTE,
    rank_nodes={"0": "node-a", "1": "node-b"},
    rank_domains={"0": "rack-b1", "1": "rack-b1"},
    unread_reports=(UNREAD,),
)

TRIGGER_ARGUMENTS = TriggerArguments(
    kubernetes_conn_id="kubernetes_default",
    gang_name=GANG,
    namespace="ml",
    deadline=1_800_001_800.0,
    mode=ReservationMode.GATES,
    size=2,
    started_at=1_800_000_000.0,
    provisioning_request=GANG,
    pod_selector=f"gang.dev/name={GANG},gang.dev/role=member",
    scheduling_gate="gang.dev/reserved",
    deadline_reason=Reason.START_WINDOW_MISSED,
    log_ranks=(0, 1),
    delete_on_kill=(
        DeleteTarget("v1/configmaps", name=f"{GANG}-owner"),
        DeleteTarget("v1/pods", label_selector=f"gang.dev/name={GANG}"),
    ),
    client_options={"request_timeout": 10.0, "retry_attempts": 8},
    try_number=2,
    tries_allowed=4,
    step_description="retry as-is (up to 2 times)",
)

KUEUE_GANG = "team-train-t1-9c2e"
MULTIKUEUE_PLAN = TryPlan(
    attempt=1,
    gang=KUEUE_GANG,
    step="as configured",
    step_index=None,
    spec=gang_spec(
        name=KUEUE_GANG, namespace="default", size=2, mode=ReservationMode.KUEUE, queue="team", distributed="torch"
    ),
    requested_at=1_800_000_000.0,
    reservation_deadline=1_800_001_800.0,
    deadline_reason=Reason.DEADLINE,
    start_deadline=None,
    kubernetes_conn_id="kube_manager",
)
MULTIKUEUE_STATE = TryState(
    plan=MULTIKUEUE_PLAN,
    owner_uid="5e0c1a2b-0000-4000-8000-00000000000a",
    job_uid="5e0c1a2b-0000-4000-8000-00000000000b",
    objects=(
        ReservedObject("v1/configmaps", f"{KUEUE_GANG}-owner", "5e0c1a2b-0000-4000-8000-00000000000a"),
        ReservedObject("batch/v1/jobs", KUEUE_GANG, "5e0c1a2b-0000-4000-8000-00000000000b"),
    ),
    launched_at=1_800_000_030.0,
    size_run=2,
    multikueue=MultiKueueDispatch(
        admission_check="multikueue",
        worker="worker-2",
        worker_conn_id="kube_worker2",
        worker_job_uid="9a8b7c6d-0000-4000-8000-00000000000c",
    ),
)
MULTIKUEUE_RECORD = TryRecord(
    attempt=1,
    gang=KUEUE_GANG,
    step="as configured",
    step_index=None,
    mode="kueue",
    size=2,
    outcome="all_succeeded",
    message="all 2 members succeeded",
    retryable=False,
    queue_seconds=30.0,
    kubernetes_conn_id="kube_manager",
    namespace="default",
    queue="team",
    worker_cluster="worker-2",
    worker_kubernetes_conn_id="kube_worker2",
)
MULTIKUEUE_RUN_ARGUMENTS = TriggerArguments(
    kubernetes_conn_id="kube_manager",
    gang_name=KUEUE_GANG,
    namespace="default",
    deadline=1_800_003_630.0,
    mode=ReservationMode.KUEUE,
    size=2,
    started_at=1_800_000_030.0,
    workload_selector="kueue.x-k8s.io/job-uid=9a8b7c6d-0000-4000-8000-00000000000c",
    pod_selector=f"airflow-gang.io/gang={KUEUE_GANG},airflow-gang.io/role=member",
    startup_deadline=1_800_000_630.0,
    members_kubernetes_conn_id="kube_worker2",
)
UNMAPPED_RUN_ARGUMENTS = replace(
    MULTIKUEUE_RUN_ARGUMENTS,
    workload_selector="kueue.x-k8s.io/job-uid=5e0c1a2b-0000-4000-8000-00000000000b",
    pod_selector=None,
    members_kubernetes_conn_id=None,
    job_name=KUEUE_GANG,
)

EXAMPLES = {
    "run_event": RUN_EVENT,
    "refused_event": REFUSED_EVENT,
    "try_state": STATE,
    "try_record": RECORD,
    "trigger_arguments": TRIGGER_ARGUMENTS,
    "multikueue_try_state": MULTIKUEUE_STATE,
    "multikueue_try_record": MULTIKUEUE_RECORD,
    "multikueue_run_arguments": MULTIKUEUE_RUN_ARGUMENTS,
    "unmapped_run_arguments": UNMAPPED_RUN_ARGUMENTS,
}
"""Golden file stem -> the record it holds."""
