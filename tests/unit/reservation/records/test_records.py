"""Every stored or passed record: its golden file (version 1) reads as the example and is what the
example writes; the readers are tolerant of added and missing optional keys, and refuse what they
cannot read, naming the record and the key."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.outcome import Decision
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.records import task_state
from airflow_provider_gang.reservation.records.events import EventTimings, GangEvent
from airflow_provider_gang.reservation.records.reading import RecordError, optional_text
from airflow_provider_gang.reservation.records.tries import TryRecord, TryState
from airflow_provider_gang.reservation.records.triggers import TriggerArguments
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.unit.reservation.records.examples import EXAMPLES, RECORD, RUN_EVENT, STATE, TRIGGER_ARGUMENTS

GOLDEN = Path(__file__).parent / "golden"
TOPOLOGY_DEFAULTS: dict[str, dict[str, Any]] = {
    "try_record": {
        "required_topology": None,
        "preferred_topology": None,
        "topology_note": None,
        "rank_nodes": {},
        "rank_domains": {},
    },
    "try_state": {
        "topology_note": None,
        "plan": dataclasses.replace(
            STATE.plan, spec=dataclasses.replace(STATE.plan.spec, required_topology=None, placement=None)
        ),
    },
}
"""What a record written before topologies were kept reads as, key by key."""


def golden(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{name}_v1.json").read_text())
    return loaded


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_golden_file_reads_as_the_example_and_is_what_it_writes(name: str) -> None:
    example = EXAMPLES[name]
    assert type(example).from_dict(golden(name)) == example
    assert json.loads(json.dumps(example.to_dict())) == golden(name)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_keys_a_newer_release_added_are_ignored(name: str) -> None:
    stored = {**golden(name), "added_by_a_newer_release": {"any": "value"}}
    assert type(EXAMPLES[name]).from_dict(stored) == EXAMPLES[name]


def test_nested_records_ignore_added_keys_too() -> None:
    stored = golden("try_state")
    stored["plan"]["added"] = 1
    stored["objects"][0]["added"] = 1
    stored["reservation_event"]["timings"]["added"] = 1
    assert TryState.from_dict(stored) == STATE


@pytest.mark.parametrize(
    ("name", "optional"),
    [
        (
            "try_record",
            [
                "queue_seconds",
                "exit_codes",
                "ladder",
                "checkpoint_step",
                "exit_code_decision",
                "kubernetes_conn_id",
                "namespace",
                "repeated",
                "node_reclaimed",
                "requested_at",
                "start_deadline",
                "zone",
                "provisioning_class",
                "teardown_started_at",
                "teardown_ended_at",
                "unread_reports",
                "version",
            ],
        ),
        ("run_event", ["admitted_count", "members", "api_error", "timings", "checkpoint", "unread_reports", "status"]),
        ("trigger_arguments", ["connection", "delete_on_kill", "client_options", "try_number", "heartbeat_seconds"]),
        ("try_state", ["owner_uid", "objects", "reservation_event", "launched_at", "size_run", "teardown_started_at"]),
    ],
)
def test_missing_optional_keys_take_their_defaults(name: str, optional: list[str]) -> None:
    kind = type(EXAMPLES[name])
    fields = {field.name: field for field in dataclasses.fields(kind)}
    defaults = {
        key: fields[key].default
        if fields[key].default_factory is dataclasses.MISSING
        else fields[key].default_factory()
        for key in optional
        if key in fields  # ``version`` and an event's ``status`` are written, never read back
    }
    stored = {key: value for key, value in golden(name).items() if key not in optional}
    assert kind.from_dict(stored) == dataclasses.replace(EXAMPLES[name], **defaults)


@pytest.mark.parametrize(
    ("older", "name", "added"),
    [
        pytest.param(
            "try_record_v1_without_place_and_teardown",
            "try_record",
            [
                "requested_at",
                "start_deadline",
                "zone",
                "queue",
                "provisioning_class",
                "teardown_started_at",
                "teardown_ended_at",
                "unread_reports",
            ],
            id="try-record",
        ),
        pytest.param("try_state_v1_without_teardown", "try_state", ["teardown_started_at"], id="try-state"),
        pytest.param(
            "try_record_v1_without_worker",
            "try_record",
            ["worker_cluster", "worker_kubernetes_conn_id"],
            id="try-record-without-worker",
        ),
        pytest.param("try_state_v1_without_multikueue", "try_state", ["multikueue"], id="try-state-without-multikueue"),
        pytest.param(
            "trigger_arguments_v1_without_members",
            "trigger_arguments",
            ["members_kubernetes_conn_id", "job_name"],
            id="trigger-arguments-without-members",
        ),
        pytest.param(
            "try_record_v1_without_topology",
            "try_record",
            ["unread_reports", "worker_cluster", "worker_kubernetes_conn_id"],
            id="try-record-without-topology",
        ),
        pytest.param("try_state_v1_without_topology", "try_state", ["multikueue"], id="try-state-without-topology"),
    ],
)
def test_a_record_stored_before_the_teardown_place_and_topology_were_kept_still_reads(
    older: str, name: str, added: list[str]
) -> None:
    """Files an earlier release of version 1 wrote: the keys added since read as their defaults (the
    topology's too: no topology, no ranks placed, a plan without topology)."""
    stored = json.loads((GOLDEN / f"{older}.json").read_text())
    assert not (set(added) | {"topology_note", "rank_domains"}) & set(stored)
    read = type(EXAMPLES[name]).from_dict(stored)
    fields = {field.name: field for field in dataclasses.fields(type(EXAMPLES[name]))}
    defaults = {
        key: fields[key].default
        if fields[key].default_factory is dataclasses.MISSING
        else fields[key].default_factory()
        for key in added
    }
    assert read == dataclasses.replace(EXAMPLES[name], **defaults, **TOPOLOGY_DEFAULTS.get(name, {}))


def _minimal(name: str) -> dict[str, Any]:
    """The golden file with every key that has a default left out."""
    kind = type(EXAMPLES[name])
    required = {
        field.name
        for field in dataclasses.fields(kind)
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    }
    minimal = {key: value for key, value in golden(name).items() if key in required}
    if name == "trigger_arguments":
        minimal["kubernetes_conn_id"] = "kubernetes_default"
    return minimal


def test_defaults_of_a_minimal_record() -> None:
    record = TryRecord.from_dict(_minimal("try_record"))
    assert (record.ladder, record.exit_codes, record.gpu_seconds_used, record.adopted_from) == (None, {}, 0.0, None)
    event = GangEvent.from_dict(_minimal("run_event"))
    assert (event.members, event.timings, event.checkpoint, event.api_error) == ((), None, None, None)
    arguments = TriggerArguments.from_dict(_minimal("trigger_arguments"))
    assert (arguments.delete_on_kill, arguments.deadline_reason, arguments.heartbeat_seconds) == (
        (),
        Reason.DEADLINE,
        300.0,
    )


@pytest.mark.parametrize(
    ("kind", "name", "key"),
    [
        (TryRecord, "try_record", "outcome"),
        (GangEvent, "run_event", "reason"),
        (TryState, "try_state", "plan"),
        (TriggerArguments, "trigger_arguments", "deadline"),
    ],
)
def test_a_missing_required_key_is_named(kind: Any, name: str, key: str) -> None:
    stored = {item: value for item, value in golden(name).items() if item != key}
    with pytest.raises(RecordError, match=f"{kind.__name__}: '{key}' is missing"):
        kind.from_dict(stored)


def test_a_nested_record_names_its_own_missing_key() -> None:
    stored = golden("try_state")
    del stored["plan"]["gang"]
    with pytest.raises(RecordError, match="TryState: 'plan' cannot be read: TryPlan: 'gang' is missing"):
        TryState.from_dict(stored)


@pytest.mark.parametrize("version", [2, "1", None])
def test_a_version_this_release_does_not_know_is_refused(version: Any) -> None:
    with pytest.raises(RecordError, match=r"'version' is .*: upgrade it"):
        TryRecord.from_dict({**golden("try_record"), "version": version})


@pytest.mark.parametrize(
    ("stored", "said"),
    [
        pytest.param([1, 2], "is a list, not a mapping", id="not-a-mapping"),
        pytest.param({**golden("try_record"), "size": "many"}, "'size' cannot be read", id="wrong-type"),
        pytest.param({**golden("try_record"), "ladder": [{"step": "Teleport"}]}, "'ladder' cannot be read", id="step"),
    ],
)
def test_what_cannot_be_read_is_refused(stored: Any, said: str) -> None:
    with pytest.raises(RecordError, match=said):
        TryRecord.from_dict(stored)


@pytest.mark.parametrize(
    "connection",
    [
        pytest.param({"kubernetes_conn_id": "a", "connection": {"in_cluster": True}}, id="both"),
        pytest.param({"kubernetes_conn_id": None}, id="neither"),
    ],
)
def test_trigger_arguments_name_exactly_one_cluster(connection: dict[str, Any]) -> None:
    with pytest.raises(RecordError, match="give exactly one"):
        TriggerArguments.from_dict({**golden("trigger_arguments"), **connection})


@pytest.mark.parametrize(
    ("mode", "pods_from_job", "expected"),
    [
        (ReservationMode.KUEUE, None, True),
        (ReservationMode.GATES, None, False),
        (ReservationMode.GATES, True, True),
        (ReservationMode.KUEUE, False, False),
    ],
)
def test_members_come_from_a_job_in_kueue_mode_unless_said(
    mode: ReservationMode, pods_from_job: bool | None, expected: bool
) -> None:
    arguments = dataclasses.replace(TRIGGER_ARGUMENTS, mode=mode, pods_from_job=pods_from_job)
    assert arguments.members_from_job is expected


def test_an_event_s_status_follows_its_phase() -> None:
    assert RUN_EVENT.to_dict()["status"] == "failure" and not RUN_EVENT.succeeded
    granted = dataclasses.replace(RUN_EVENT, phase=Phase.RESERVED)
    assert granted.to_dict()["status"] == "success" and granted.succeeded
    assert GangEvent.from_dict({**RUN_EVENT.to_dict(), "status": "success"}) == RUN_EVENT  # derived, not read


def test_an_event_reports_a_decision() -> None:
    decision = Decision(phase=Phase.RESERVED, terminal=True, reason=Reason.RESERVED, message="ok", admitted_count=3)
    timings = EventTimings(10.0, 20.0, 10.0, {"reserved": 20.0})
    event = GangEvent.of_decision(
        decision, stage=Stage.RESERVATION, gang_name="g", namespace="n", mode=ReservationMode.KUEUE, timings=timings
    )
    assert (event.admitted_count, event.members, event.succeeded) == (3, (), True)
    assert (timings.first_seen(Phase.RESERVED), timings.first_seen(Phase.RUNNING)) == (20.0, None)


def test_the_task_state_keys_read_through_the_records() -> None:
    stored = [RECORD.to_dict(), dataclasses.replace(RECORD, attempt=3).to_dict()]
    assert [record.attempt for record in task_state.read_tries(stored)] == [2, 3]
    assert task_state.read_tries(None) == []
    with pytest.raises(ValueError, match=r"gang\.tries holds a dict"):
        task_state.read_tries({"attempt": 1})
    assert task_state.read_current(copy.deepcopy(golden("try_state"))) == STATE
    assert task_state.read_current(None) is None
    assert (task_state.TRIES_KEY, task_state.CURRENT_KEY) == ("gang.tries", "gang.current")
    assert "success" in task_state.FINAL_TASK_STATES and "deferred" not in task_state.FINAL_TASK_STATES


def test_a_state_changes_into_a_new_state() -> None:
    launched = STATE.with_changes(launched_at=5.0, size_run=1)
    assert (launched.launched_at, launched.size_run, launched.plan) == (5.0, 1, STATE.plan)
    assert STATE.launched_at == 1_800_000_060.0


def test_an_empty_uid_reads_as_none() -> None:
    assert (optional_text(""), optional_text(None), optional_text("u")) == (None, None, "u")
    assert TryState.from_dict({**golden("try_state"), "owner_uid": ""}).owner_uid is None
