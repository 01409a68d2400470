"""The ``checkpoint`` argument (parse-time checks, templating), which try resumes from what (from
the try history, never guessed), the record and summary of GPU time lost and saved."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.checkpoint import Checkpoint, CheckpointReport, PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs
from airflow_provider_gang.reservation.members import MemberState, MemberStatus
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.records.events import GangEvent
from airflow_provider_gang.reservation.records.reading import RecordError
from airflow_provider_gang.reservation.records.tries import TryPlan, TryRecord, TryState
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from airflow_provider_gang.reservation.tries.plan import plan_try
from airflow_provider_gang.reservation.tries.results import TryEnding, story, summary, try_record
from tests.builders import gang_event

GOOD: dict[str, Any] = {"task_id": "train", "image": "trainer:1", "size": 2, "gpus": 1}
NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "said"),
    [
        pytest.param("checkpoints/run", "neither a URI", id="relative-path"),
        pytest.param(7, "expected a URI or absolute path", id="not-a-string"),
        pytest.param(PersistentVolumeCheckpoint(claim="Bad_Claim"), "is not a claim name", id="claim-name"),
        pytest.param(PersistentVolumeCheckpoint(claim="c", sub_path="../x"), "without '..'", id="sub-path"),
    ],
)
def test_a_bad_checkpoint_is_refused_at_parse_time_naming_the_argument(value: Any, said: str) -> None:
    with pytest.raises(GangArgumentError, match="argument 'checkpoint'") as caught:
        GangTrainingOperator(**GOOD, checkpoint=value)
    assert said in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [
        "gs://bucket/{{ dag.dag_id }}/{{ run_id }}",
        "/mnt/ckpt/{{ run_id }}",
        "{{ var.value.checkpoint_root }}/x",
        PersistentVolumeCheckpoint(claim="{{ params.claim }}", sub_path="{{ dag.dag_id }}/{{ run_id }}"),
    ],
)
def test_a_templated_checkpoint_passes_parse_time_and_warns_nothing(value: Any) -> None:
    op = GangTrainingOperator(**GOOD, checkpoint=value)
    assert "checkpoint" in op.template_fields
    assert op.argument_warnings() == []


def test_a_checkpoint_shared_by_every_run_is_warned_about() -> None:
    op = GangTrainingOperator(**GOOD, checkpoint="gs://bucket/fixed")
    assert op.argument_warnings() == [
        "checkpoint 'gs://bucket/fixed' is the same for every run of the DAG, so runs "
        "overwrite each other's checkpoints; add the run to it, e.g. '.../{{ run_id }}'"
    ]


def test_the_rendered_claim_and_sub_path_are_what_members_mount() -> None:
    op = GangTrainingOperator(
        **GOOD, checkpoint=PersistentVolumeCheckpoint(claim="{{ params.claim }}", sub_path="{{ run_id }}")
    )
    op.checkpoint.claim, op.checkpoint.sub_path = "team-ckpt", "manual__1"  # as Airflow renders them
    assert op.build_spec("gang-t1-abc").checkpoint == Checkpoint(
        "/gang-checkpoint", claim="team-ckpt", sub_path="manual__1"
    )


def record(
    attempt: int,
    outcome: Reason,
    *,
    step: int | None = None,
    checkpoint_step: int | None = None,
    resumed: int | None = None,
    used: float = 0.0,
    lost: float = 0.0,
    saved: float = 0.0,
) -> TryRecord:
    return TryRecord(
        attempt=attempt,
        gang=f"g-t{attempt}",
        step="",
        step_index=step,
        mode="provisioning_request",
        size=2,
        outcome=outcome.value,
        message="",
        retryable=outcome is not Reason.ALL_SUCCEEDED,
        checkpoint_step=checkpoint_step,
        resumed_from_step=resumed,
        gpu_seconds_used=used,
        gpu_seconds_lost=lost,
        gpu_seconds_saved=saved,
    )


def plan(try_number: int, records: list[TryRecord], checkpoint: str | None = "/ckpt/run-1") -> tuple[TryPlan, str]:
    op = GangTrainingOperator(
        **GOOD, spot=True, checkpoint=checkpoint, retries=3, fallbacks=[RetryAsIs(times=2), OnDemand()]
    )
    ti = SimpleNamespace(dag_id="nightly", task_id="train", run_id="scheduled__1", map_index=-1, try_number=try_number)
    return plan_try(
        ti=ti,
        records=records,
        ladder=op.fallbacks,
        configured=op.build_spec("configured"),
        reservation_timeout_seconds=600,
        start_deadline=None,
        now=NOW,
    )


RESUMES = [
    ("first-try-afresh", 1, [], None),
    ("no-checkpoint-reported-stays-afresh", 2, [record(1, Reason.SPOT_PREEMPTED)], None),
    ("resumes-from-the-reported-step", 2, [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=20)], 20),
    (
        "a-later-silent-try-keeps-the-earlier-step",
        3,
        [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=20), record(2, Reason.SPOT_PREEMPTED, step=0, resumed=20)],
        20,
    ),
    (
        "the-latest-report-wins",
        3,
        [
            record(1, Reason.SPOT_PREEMPTED, checkpoint_step=20),
            record(2, Reason.MEMBER_FAILED, step=0, checkpoint_step=35),
        ],
        35,
    ),
    ("a-killed-try-s-checkpoint-counts", 2, [record(1, Reason.KILLED, checkpoint_step=12)], 12),
    (
        "a-finished-sequence-is-not-resumed",
        3,
        [record(1, Reason.ALL_SUCCEEDED, checkpoint_step=60), record(2, Reason.SPOT_PREEMPTED)],
        None,
    ),
]


@pytest.mark.parametrize(("try_number", "records", "resume"), [c[1:] for c in RESUMES], ids=[c[0] for c in RESUMES])
def test_resume_is_known_from_the_try_history(try_number: int, records: list[TryRecord], resume: int | None) -> None:
    chosen, explanation = plan(try_number, records)
    checkpoint = chosen.spec.checkpoint
    assert checkpoint == Checkpoint("/ckpt/run-1", try_number=try_number, resume_step=resume)
    assert ("GANG_RESUME=1" in explanation) is (resume is not None)
    assert ("GANG_RESUME unset" in explanation) is (resume is None)


def test_without_a_checkpoint_nothing_is_said_about_resuming() -> None:
    chosen, explanation = plan(2, [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=20)], checkpoint=None)
    assert chosen.spec.checkpoint is None and "GANG_RESUME" not in explanation


def test_the_try_state_with_a_checkpoint_round_trips_and_a_newer_version_is_refused() -> None:
    chosen, _ = plan(2, [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=20)])
    state = TryState(plan=chosen)
    stored = state.to_dict()
    assert stored["version"] == 1
    assert TryState.from_dict(stored) == state
    with pytest.raises(RecordError, match="upgrade"):
        TryState.from_dict({**stored, "version": 2})


def _event(reason: Reason, checkpoint: CheckpointReport | None, *, ran: float) -> GangEvent:
    start = NOW + 10
    members = tuple(
        MemberStatus(rank, MemberState.LOST, "p", "n", started_at=start, finished_at=start + ran) for rank in (0, 1)
    )
    return gang_event(
        reason,
        started_at=NOW + 5,
        event_at=start + ran,
        phases={"running": start},
        members=members,
        checkpoint=checkpoint,
    )


RESERVED = gang_event(Reason.RESERVED, started_at=NOW - 60, event_at=NOW)


def test_a_preempted_try_records_its_checkpoint_and_splits_its_gpu_time() -> None:
    chosen, _ = plan(1, [])
    state = TryState(plan=chosen, launched_at=NOW + 5, size_run=2)
    run = _event(Reason.SPOT_PREEMPTED, CheckpointReport(15, 20, "p-0", 0), ran=1800)
    made = try_record(state, RESERVED, run, TryEnding.of_event(run), gpus=1, now=NOW + 1810)
    assert (made.checkpoint_step, made.checkpoint_progress, made.resumed_from_step) == (15, 20, None)
    assert made.gpu_seconds_used == 3600
    assert (made.gpu_seconds_saved, made.gpu_seconds_lost) == (2700, 900)


def test_a_try_that_reported_no_checkpoint_lost_all_it_used_and_a_success_loses_nothing() -> None:
    chosen, _ = plan(2, [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=15)])
    state = TryState(plan=chosen, launched_at=NOW + 5, size_run=2)
    failed = _event(Reason.SPOT_PREEMPTED, None, ran=900)
    made = try_record(state, RESERVED, failed, TryEnding.of_event(failed), gpus=1, now=NOW + 910)
    assert (made.resumed_from_step, made.gpu_seconds_lost, made.gpu_seconds_saved) == (15, 1800, 0)
    finished = _event(Reason.ALL_SUCCEEDED, CheckpointReport(30, 30, "p-0", 0), ran=900)
    done = try_record(state, RESERVED, finished, TryEnding.of_event(finished), gpus=1, now=NOW + 910)
    assert (done.checkpoint_step, done.gpu_seconds_lost, done.gpu_seconds_saved) == (30, 0, 0)


def test_the_summary_and_the_log_show_gpu_hours_lost_and_saved() -> None:
    chosen, _ = plan(2, [record(1, Reason.SPOT_PREEMPTED, checkpoint_step=15)])
    records = [
        record(1, Reason.SPOT_PREEMPTED, checkpoint_step=15, used=3600, lost=900, saved=2700),
        record(2, Reason.ALL_SUCCEEDED, step=0, resumed=15, checkpoint_step=30, used=1800),
    ]
    made = summary(chosen, records[1], records)
    assert made["checkpoint"] == {
        "location": "/ckpt/run-1",
        "resumed_from_step": 15,
        "gpu_hours_lost": 0.25,
        "gpu_hours_saved": 0.75,
    }
    assert [(item["gpu_hours_lost"], item["gpu_hours_saved"]) for item in made["tries"]] == [(0.25, 0.75), (0, 0)]
    assert story(records)[-1] == (
        "  checkpoints: 0.2500 GPU-h lost (work since the last checkpoint, redone), "
        "0.7500 GPU-h saved by resuming (try 2 from step 15)"
    )
    plain = dataclasses.replace(records[0], checkpoint_step=None)
    assert not any("checkpoints:" in line for line in story([plain]))
