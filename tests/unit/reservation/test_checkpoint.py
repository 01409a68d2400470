"""Checkpoint locations, the environment members get, termination-message reports, spot preemption
as its own reason, and the GPU-time split of a preempted try."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from airflow_provider_gang.reservation import checkpoint, decision, member_history, members
from airflow_provider_gang.reservation.checkpoint import Checkpoint, CheckpointReport, PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.decision import Observed, Policy, Stage
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.manifests import pods as member_pods
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode
from tests.builders import T0, gang_spec, member, template


@pytest.mark.parametrize("value", ["gs://bucket/dag/run", "/mnt/checkpoints/run-1", "s3://b/k"])
def test_a_uri_or_absolute_path_is_the_location(value: str) -> None:
    assert checkpoint.from_argument(value) == Checkpoint(location=value)


BAD_ARGUMENTS = [
    ("relative-path", "checkpoints/run", "neither a URI"),
    ("empty", "  ", "expected a URI or absolute path"),
    ("not-a-string", 42, "expected a URI or absolute path"),
    ("claim-name", PersistentVolumeCheckpoint(claim="Bad_Name"), "is not a claim name"),
    ("sub-path-escapes", PersistentVolumeCheckpoint(claim="ckpt", sub_path="../other"), "without '..'"),
    ("sub-path-absolute", PersistentVolumeCheckpoint(claim="ckpt", sub_path="/abs"), "relative path"),
    ("mount-root", PersistentVolumeCheckpoint(claim="ckpt", mount_path="/"), "absolute path other than '/'"),
]


@pytest.mark.parametrize(("value", "fragment"), [case[1:] for case in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_checkpoint_argument_names_the_fix(value: object, fragment: str) -> None:
    with pytest.raises(GangSpecError, match="checkpoint") as raised:
        checkpoint.from_argument(value)  # type: ignore[arg-type]
    assert fragment in raised.value.message


def _env(spec: GangSpec) -> dict[str, str]:
    container = member_pods.launch_pod(spec, 0, owner_uid="uid")["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container["env"]}


def test_members_of_a_first_try_get_the_location_and_try_but_no_resume() -> None:
    spec = gang_spec(checkpoint=Checkpoint("gs://b/run").for_try(1, None))
    env = _env(spec)
    assert (env["GANG_CHECKPOINT_DIR"], env["GANG_TRY_NUMBER"]) == ("gs://b/run", "1")
    assert env["GANG_TERMINATION_MESSAGE_PATH"] == "/dev/termination-log"
    assert "GANG_RESUME" not in env and "GANG_RESUME_STEP" not in env


def test_a_resuming_try_gets_the_step_and_container_zeros_own_message_path() -> None:
    pod_template = template()
    pod_template["spec"]["containers"][0]["terminationMessagePath"] = "/tmp/last-words"
    spec = gang_spec(pod_template=pod_template, checkpoint=Checkpoint("/ckpt").for_try(3, 40))
    env = _env(spec)
    assert (env["GANG_RESUME"], env["GANG_RESUME_STEP"], env["GANG_TRY_NUMBER"]) == ("1", "40", "3")
    assert env["GANG_TERMINATION_MESSAGE_PATH"] == "/tmp/last-words"


def test_without_a_checkpoint_members_get_none_of_it() -> None:
    assert not [name for name in _env(gang_spec()) if "CHECKPOINT" in name or "RESUME" in name]


def test_a_claim_is_mounted_in_every_container_at_its_sub_path() -> None:
    pod_template = template()
    pod_template["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    chosen = checkpoint.from_argument(PersistentVolumeCheckpoint(claim="ckpt", sub_path="dag/run"))
    spec = gang_spec(pod_template=pod_template, checkpoint=chosen.for_try(1, None))
    pod_spec = member_pods.member_template(spec)["spec"]
    assert pod_spec["volumes"] == [{"name": "gang-checkpoint", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    mounts = [container["volumeMounts"] for container in pod_spec["containers"]]
    assert mounts == [[{"name": "gang-checkpoint", "mountPath": "/gang-checkpoint", "subPath": "dag/run"}]] * 2
    assert _env(spec)["GANG_CHECKPOINT_DIR"] == "/gang-checkpoint"


def test_the_spec_round_trips_its_checkpoint_and_old_specs_read_without_one() -> None:
    spec = gang_spec(checkpoint=Checkpoint("/c", claim="ckpt", sub_path="x").for_try(2, 7))
    assert GangSpec.from_dict(spec.to_dict()) == spec
    old = {key: value for key, value in gang_spec().to_dict().items() if key != "checkpoint"}
    assert GangSpec.from_dict(old).checkpoint is None


MESSAGES = [
    ("step-only", '{"checkpoint_step": 20}', (20, 20)),
    ("with-progress", '{"checkpoint_step": 20, "step": 23}', (20, 23)),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in MESSAGES], ids=[c[0] for c in MESSAGES])
def test_a_termination_message_gives_the_step(text: str, expected: tuple[int, int]) -> None:
    assert checkpoint.parse_message(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not json", "not JSON"),
        ('{"step": 3}', '"checkpoint_step"'),
        ('{"checkpoint_step": "20"}', "whole number"),
        ('{"checkpoint_step": -1}', "whole number"),
        ('{"checkpoint_step": true}', "whole number"),
        ('{"checkpoint_step": 5, "step": 2}', "before checkpoint_step"),
        ("[20]", '"checkpoint_step"'),
    ],
)
def test_a_malformed_message_says_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        checkpoint.parse_message(text)


def test_a_pod_reports_its_last_message_and_a_malformed_one_is_ignored_with_a_warning_naming_the_pod() -> None:
    good = member(0).failed().obj()
    good["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": 10}'
    assert checkpoint.report_of_pod(good, 0) == (CheckpointReport(10, 10, "gang-t1-abc-0", 0), None)
    bad = member(1).failed().obj()
    bad["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": "ten"}'
    report, warning = checkpoint.report_of_pod(bad, 1)
    assert report is None
    assert warning is not None and "pod gang-t1-abc-1" in warning and "ignored" in warning
    assert checkpoint.report_of_pod(member(2).running().obj(), 2) == (None, None)


def test_the_latest_report_is_the_most_advanced_checkpoint() -> None:
    early, late = CheckpointReport(10, 12, "p0", 0), CheckpointReport(20, 20, "p1", 1)
    assert checkpoint.latest([None, early, late, None]) == late
    assert checkpoint.latest([None]) is None
    assert checkpoint.resume_step([10, None, 20, None]) == 20
    assert checkpoint.resume_step([None, None]) is None


def test_a_preempted_try_splits_its_gpu_time_at_its_checkpoint() -> None:
    assert checkpoint.split_work(100.0, start_step=0, report=CheckpointReport(15, 20)) == checkpoint.WorkSplit(
        lost=25.0, saved=75.0
    )
    assert checkpoint.split_work(100.0, start_step=10, report=CheckpointReport(15, 20)).saved == 50.0
    assert checkpoint.split_work(100.0, start_step=0, report=None) == checkpoint.WorkSplit(lost=100.0)
    assert checkpoint.split_work(100.0, start_step=15, report=CheckpointReport(15, 20)).lost == 100.0


# -- spot preemption --------------------------------------------------------------------------


def _run(*pods, size=2, preempted=frozenset(), shutting_down=frozenset()):
    return Observed(
        mode=ReservationMode.PROVISIONING_REQUEST,
        stage=Stage.RUN,
        size=size,
        started_at=T0,
        pods=[item.obj() for item in pods],
        spot_preempted_ranks=preempted,
        nodes_shutting_down=shutting_down,
    )


SPOT_CASES = [
    (
        "shutting-down-waits-for-the-last-words",
        _run(member(0).on_spot().running(), member(1).on_spot().shutting_down()),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-peer-on-the-node-still-running-is-waited-for",
        _run(member(0).on_spot().container_running(), member(1).on_spot().shut_down()),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-peer-on-another-node-is-not-waited-for",
        _run(member(0).on_spot().container_running().bound("node-2"), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "shut-down-is-spot-preempted",
        _run(member(0).on_spot().shut_down(), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "outranks-the-peer-that-failed-after-it",
        _run(member(0).on_spot().failed(), member(1).on_spot().shut_down()),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "remembered-after-the-pod-went",
        _run(member(0).on_spot().failed(), preempted=frozenset({1})),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "on-demand-node-shutdown-is-member-lost",
        _run(member(0).running(), member(1).shut_down()),
        Phase.FAILED,
        True,
        Reason.MEMBER_LOST,
    ),
    (
        "a-peer-failing-first-waits-for-the-member-on-the-tainted-node",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().container_running(),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.RUNNING,
        False,
        Reason.MEMBERS_RUNNING,
    ),
    (
        "a-stopped-member-on-the-tainted-node-is-spot-preempted-before-its-own-status-says-so",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().failed(143),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.FAILED,
        True,
        Reason.SPOT_PREEMPTED,
    ),
    (
        "a-member-that-succeeded-on-a-tainted-node-is-no-preemption",
        _run(
            member(0).on_spot().failed().bound("node-2"),
            member(1).on_spot().succeeded(),
            shutting_down=frozenset({"node-1"}),
        ),
        Phase.FAILED,
        True,
        Reason.MEMBER_FAILED,
    ),
    (
        "an-on-demand-member-on-a-tainted-node-is-no-spot-preemption",
        _run(member(0).failed().bound("node-2"), member(1).failed(143), shutting_down=frozenset({"node-1"})),
        Phase.FAILED,
        True,
        Reason.MEMBER_FAILED,
    ),
    (
        "a-member-that-finished-first-is-no-preemption",
        _run(
            member(0).on_spot().succeeded(),
            member(1).on_spot().succeeded().condition("DisruptionTarget", reason="TerminationByKubelet"),
        ),
        Phase.SUCCEEDED,
        True,
        Reason.ALL_SUCCEEDED,
    ),
]


@pytest.mark.parametrize(
    ("observed", "phase", "terminal", "reason"), [c[1:] for c in SPOT_CASES], ids=[c[0] for c in SPOT_CASES]
)
def test_spot_preemption_is_its_own_reason(observed, phase, terminal, reason) -> None:
    decided = decision.decide(observed, now=T0 + 10, policy=Policy())
    assert (decided.phase, decided.terminal, decided.reason) == (phase, terminal, reason)


def test_the_run_memory_keeps_preemptions_and_the_latest_checkpoint_and_warns_once() -> None:
    memory = member_history.RunMemory()
    talking = member(0).on_spot().failed().obj()
    talking["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = '{"checkpoint_step": 8, "step": 9}'
    garbled = member(1).on_spot().shut_down(message="{oops").obj()
    observed = dataclasses.replace(_run(), pods=[talking, garbled])
    seen, warnings = memory.see(observed)
    assert seen.spot_preempted_ranks == frozenset({1})
    assert memory.checkpoint == CheckpointReport(8, 9, "gang-t1-abc-0", 0)
    assert len(warnings) == 1 and "gang-t1-abc-1" in warnings[0]
    later, warnings = memory.see(dataclasses.replace(_run(), pods=[garbled]))
    assert warnings == [] and later.spot_preempted_ranks == frozenset({1})
    assert memory.checkpoint == CheckpointReport(8, 9, "gang-t1-abc-0", 0)


def test_without_a_checkpoint_termination_messages_are_not_read() -> None:
    memory = member_history.RunMemory(read_checkpoints=False)
    garbled = member(0).on_spot().shut_down(message="{oops").obj()
    seen, warnings = memory.see(dataclasses.replace(_run(), pods=[garbled]))
    assert (warnings, memory.checkpoint, seen.spot_preempted_ranks) == ([], None, frozenset({0}))


def test_a_member_gone_with_a_node_found_shutting_down_was_preempted() -> None:
    """Rank 1 ran on spot node-1 and is gone (its node deleted); rank 0 failed on node-2 after it."""
    memory = member_history.RunMemory(read_checkpoints=False)
    peer = member(0).on_spot().failed().bound("node-2").obj()
    memory.see(dataclasses.replace(_run(), pods=[peer, member(1).on_spot().container_running().obj()]))
    gone = dataclasses.replace(_run(), pods=[peer])
    seen, _ = memory.see(gone)
    assert decision.decide(seen, now=T0 + 10, policy=Policy()).reason is Reason.MEMBER_FAILED
    memory.saw_nodes_shutting_down(frozenset({"node-1"}))
    seen, _ = memory.see(gone)
    assert (seen.spot_preempted_ranks, seen.nodes_shutting_down) == (frozenset({1}), frozenset({"node-1"}))
    assert decision.decide(seen, now=T0 + 10, policy=Policy()).reason is Reason.SPOT_PREEMPTED


def test_spot_nodes_are_those_of_bound_spot_members() -> None:
    pods = [
        member(0).on_spot().running().obj(),
        member(1).running().obj(),
        member(2).on_spot().obj(),
        member(5).on_spot().running().obj(),
        member(None).on_spot().running().obj(),
    ]
    assert members.spot_nodes(pods, size=4) == {0: "node-1"}


# -- parse-time stand-ins, environment, mounts, stored reports -------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gs://bucket/{{ dag.dag_id }}/{{ run_id }}", "gs://bucket/x/x"),
        ("gs://{{ var.value.bucket }}/run", "gs://x/run"),
        ("/mnt/checkpoints/{{ run_id }}", "/mnt/checkpoints/x"),
        ("{{ var.value.checkpoint_root }}/run", "/parse-check/run"),
        ("{{ var.value.checkpoint }}", "/parse-check"),
        ("/mnt/{% if params.fast %}fast{% else %}slow{% endif %}", "/mnt/xfastxslowx"),
    ],
    ids=["uri", "templated-bucket", "path", "templated-root", "all-templated", "statement"],
)
def test_a_templated_location_stands_in_as_a_valid_one_of_its_kind(value: str, expected: str) -> None:
    stood_in = checkpoint.stand_in(value)
    assert stood_in == expected
    assert checkpoint.from_argument(stood_in) == Checkpoint(location=expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["checkpoints/run", 42, None, "gs://bucket/run"])
def test_a_location_without_jinja_is_checked_as_written(value: object) -> None:
    assert checkpoint.stand_in(value) is value


def test_a_templated_claim_stands_in_for_its_jinja_parts_only() -> None:
    written = PersistentVolumeCheckpoint(
        claim="{{ params.claim }}", sub_path="{{ dag.dag_id }}/{{ run_id }}", mount_path="/ckpt"
    )
    stood_in = checkpoint.stand_in(written)
    assert stood_in == PersistentVolumeCheckpoint(claim="x", sub_path="x/x", mount_path="/ckpt")
    assert written.claim == "{{ params.claim }}"  # the operator's own argument keeps its Jinja to render later
    assert checkpoint.from_argument(stood_in) == Checkpoint(
        "/ckpt",
        claim="x",  # type: ignore[arg-type]
        sub_path="x/x",
    )
    plain = checkpoint.stand_in(PersistentVolumeCheckpoint(claim="ckpt-{{ ds_nodash }}", sub_path="{{ run_id }}"))
    assert plain == PersistentVolumeCheckpoint(claim="ckpt-x", sub_path="x")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (PersistentVolumeCheckpoint(claim="{{ params.claim }}", mount_path="/"), "mount_path"),
        (PersistentVolumeCheckpoint(claim="Bad_Name", sub_path="{{ run_id }}"), "is not a claim name"),
        (PersistentVolumeCheckpoint(claim="{{ params.claim }}", sub_path="/abs"), "relative path"),
        (PersistentVolumeCheckpoint(claim="ckpt", sub_path="../{{ run_id }}"), "sub_path"),
        ("checkpoints/{{ run_id }}", "neither a URI"),
    ],
    ids=["mount-root", "claim", "sub-path", "templated-sub-path-leaving-the-volume", "templated-relative-path"],
)
def test_the_parts_without_jinja_are_still_refused_at_parse_time(value: object, fragment: str) -> None:
    with pytest.raises(GangSpecError, match=fragment):
        checkpoint.from_argument(checkpoint.stand_in(value))  # type: ignore[arg-type]


def test_a_checkpoint_before_its_try_is_planned_gives_only_the_location_and_message_path() -> None:
    assert checkpoint.environment(Checkpoint("/c"), "/dev/termination-log") == [
        {"name": "GANG_CHECKPOINT_DIR", "value": "/c"},
        {"name": "GANG_TERMINATION_MESSAGE_PATH", "value": "/dev/termination-log"},
    ]
    assert [item["name"] for item in checkpoint.environment(Checkpoint("/c", resume_step=4), "/m")] == [
        "GANG_CHECKPOINT_DIR",
        "GANG_TERMINATION_MESSAGE_PATH",
        "GANG_RESUME",
        "GANG_RESUME_STEP",
    ]


def test_a_claim_without_sub_path_is_mounted_at_the_volume_root_once_however_often_it_is_mounted() -> None:
    pod_spec: dict[str, Any] = {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containers": [{"name": "worker", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    }
    claim = Checkpoint("/gang-checkpoint", claim="ckpt")
    checkpoint.mount(pod_spec, claim)
    checkpoint.mount(pod_spec, claim)
    assert pod_spec["volumes"] == [
        {"name": "data", "emptyDir": {}},
        {"name": "gang-checkpoint", "persistentVolumeClaim": {"claimName": "ckpt"}},
    ]
    assert pod_spec["containers"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "gang-checkpoint", "mountPath": "/gang-checkpoint"},
    ]
    unmounted: dict[str, Any] = {"containers": [{"name": "worker"}]}
    checkpoint.mount(unmounted, Checkpoint("gs://b/run"))
    assert unmounted == {"containers": [{"name": "worker"}]}


def test_a_report_round_trips_through_the_try_record_and_a_bare_one_reads_as_its_step() -> None:
    report = CheckpointReport(20, 23, "gang-t1-abc-1", 1)
    assert report.to_dict() == {"step": 20, "progress": 23, "pod": "gang-t1-abc-1", "rank": 1}
    assert CheckpointReport.from_dict(report.to_dict()) == report
    assert CheckpointReport.from_dict({"step": 7}) == CheckpointReport(7, 7, "", None)


def _with_statuses(*statuses: dict[str, Any]) -> dict[str, Any]:
    running: dict[str, Any] = member(0).running().obj()
    running["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    running["status"]["containerStatuses"] = list(statuses)
    return running


def _terminated(message: str = "") -> dict[str, Any]:
    return {"terminated": {"exitCode": 1, **({"message": message} if message else {})}}


def test_a_restarted_container_reports_the_message_of_its_last_termination() -> None:
    restarted = _with_statuses(
        {"name": "worker", "state": {"running": {}}, "lastState": _terminated('{"checkpoint_step": 5, "step": 6}')}
    )
    assert checkpoint.report_of_pod(restarted, 0) == (CheckpointReport(5, 6, "gang-t1-abc-0", 0), None)
    both = _with_statuses(
        {
            "name": "worker",
            "state": _terminated('{"checkpoint_step": 9}'),
            "lastState": _terminated('{"checkpoint_step": 5}'),
        }
    )
    assert checkpoint.report_of_pod(both, 0)[0] == CheckpointReport(9, 9, "gang-t1-abc-0", 0)


def test_only_container_zero_reports_and_a_termination_without_a_message_reports_nothing() -> None:
    sidecar_first = _with_statuses(
        {"name": "sidecar", "state": _terminated('{"checkpoint_step": 99}')},
        {"name": "worker", "state": _terminated('{"checkpoint_step": 10}')},
    )
    assert checkpoint.report_of_pod(sidecar_first, 0)[0] == CheckpointReport(10, 10, "gang-t1-abc-0", 0)
    silent = _with_statuses(
        {"name": "sidecar", "state": _terminated('{"checkpoint_step": 99}')},
        {"name": "worker", "state": _terminated(), "lastState": {}},
    )
    assert checkpoint.report_of_pod(silent, 0) == (None, None)


def test_init_containers_mount_the_claim_too() -> None:
    pod_spec: dict[str, Any] = {"initContainers": [{"name": "fetch"}], "containers": [{"name": "worker"}]}
    checkpoint.mount(pod_spec, Checkpoint("/gang-checkpoint", claim="ckpt", sub_path="run-1"))
    mount = {"name": "gang-checkpoint", "mountPath": "/gang-checkpoint", "subPath": "run-1"}
    assert [item["volumeMounts"] for item in pod_spec["initContainers"] + pod_spec["containers"]] == [[mount]] * 2
