"""The sweep's rule (``sweep.verdict.judge``): which gangs may be withdrawn, table-driven."""

from __future__ import annotations

import pytest

from airflow_provider_gang.sweep.airflow_state import gang_names_of, stored_gang_names
from airflow_provider_gang.sweep.verdict import TaskInstanceFacts, TaskInstanceKey, judge

KEY = TaskInstanceKey("dag", "run", "train")


def facts(state: str | None, *, test_run: bool = False, alive: bool | None = None) -> TaskInstanceFacts:
    return TaskInstanceFacts(KEY, state, 1, triggered_by="test" if test_run else "rest_api", process_alive=alive)


@pytest.mark.parametrize(
    ("found", "withdraw", "words"),
    [
        pytest.param(facts("failed"), True, "is failed", id="failed"),
        pytest.param(facts("success"), True, "is success", id="success"),
        pytest.param(facts("upstream_failed"), True, "is upstream_failed", id="upstream-failed"),
        pytest.param(None, True, "no task instance of this Airflow", id="gone"),
        pytest.param(facts("running"), False, "is running", id="running"),
        pytest.param(facts("deferred"), False, "is deferred", id="deferred"),
        pytest.param(facts("queued"), False, "is queued", id="queued"),
        pytest.param(facts(None), False, "is no state", id="no-state"),
        pytest.param(facts("up_for_retry"), False, "may adopt it", id="up-for-retry"),
        pytest.param(facts("queued", test_run=True, alive=False), True, "whose process is gone", id="dead-dags-test"),
        pytest.param(facts("running", test_run=True, alive=True), False, "is running", id="live-dags-test"),
        pytest.param(facts("queued", test_run=True, alive=None), False, "is queued", id="dags-test-elsewhere"),
        pytest.param(facts("up_for_retry", test_run=True, alive=False), False, "up_for_retry", id="dead-dags-retry"),
        pytest.param(facts("running", alive=False), False, "is running", id="dead-pid-not-a-test-run"),
    ],
)
def test_judge(found: TaskInstanceFacts | None, withdraw: bool, words: str) -> None:
    verdict = judge(found)
    assert verdict.withdraw is withdraw
    assert words in verdict.reason


def test_a_gang_being_deleted_is_left_to_the_garbage_collector() -> None:
    assert not judge(facts("failed"), deleting=True).withdraw


def test_every_try_names_its_gang() -> None:
    names = gang_names_of(TaskInstanceKey("dag", "run", "train", 3), 2)
    assert len(set(names)) == 2 and all("-m3-t" in name for name in names)


def test_stored_tries_name_their_gangs_and_malformed_rows_name_nothing() -> None:
    stored = [
        ("gang.current", '{"plan": {"gang": "g-current"}}'),
        ("gang.tries", '[{"gang": "g-one"}, {"gang": ""}, 3]'),
        ("gang.tries", "not json"),
        ("gang.current", "[1]"),
    ]
    assert stored_gang_names(stored) == ["g-current", "g-one"]
