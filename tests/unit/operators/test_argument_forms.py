"""Arguments a user writes the way Airflow's own operators accept them, and parse-time warnings for
what is allowed but probably not meant."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OtherZone, RetryAsIs, ShrinkTo
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

GOOD: dict[str, Any] = {"task_id": "train", "image": "trainer:1", "size": 4, "gpus": 1}


def test_timeouts_accept_seconds_like_airflow_retry_delay() -> None:
    op = GangTrainingOperator(**GOOD, reservation_timeout=600, startup_timeout=90.5, run_timeout=3600, start_by=7200)
    assert (op.reservation_timeout, op.startup_timeout, op.run_timeout, op.start_by) == (
        timedelta(minutes=10),
        timedelta(seconds=90.5),
        timedelta(hours=1),
        timedelta(hours=2),
    )
    assert op.try_settings().reservation_timeout == timedelta(minutes=10)


@pytest.mark.parametrize(
    ("fallbacks", "said"),
    [
        pytest.param(OtherZone("us-central1-b"), "wrap it in a list: fallbacks=[OtherZone(", id="single-step"),
        pytest.param(["us-central1-b"], "write a step, e.g. OtherZone('us-central1-b')", id="zone-name"),
        pytest.param(
            [RetryAsIs(applies_to="capacity_revoked")],  # type: ignore[arg-type]
            "applies_to must be a set of reasons, got 'capacity_revoked'",
            id="applies-to-string",
        ),
    ],
)
def test_ladder_mistakes_say_how_to_write_it(fallbacks: Any, said: str) -> None:
    with pytest.raises(GangArgumentError, match="argument 'fallbacks'") as caught:
        GangTrainingOperator(**GOOD, retries=1, fallbacks=fallbacks)
    assert said in str(caught.value)


def test_parse_time_warnings() -> None:
    op = GangTrainingOperator(
        **GOOD,
        retries=1,
        fallbacks=[ShrinkTo(16), OtherZone("b")],
        provisioning_class="check-capacity.autoscaling.x-k8s.io",
        provisioning_parameters={"noRetry": "true", "validUntilSeconds": "60"},
    )
    warnings = op.argument_warnings()
    assert warnings == [
        "fallbacks step 1 (shrink to 16 members) changes nothing for this gang; remove it or change it",
        "fallbacks has 2 steps but retries=1: only 1 retry can use them; set retries=2",
        "provisioning_parameters ['validUntilSeconds'] are not read by check-capacity.autoscaling.x-k8s.io "
        "(known keys: noRetry, processorInstance)",
    ]


def test_parse_time_warnings_are_logged(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    GangTrainingOperator(**GOOD, fallbacks=[RetryAsIs()])
    logged = caplog.text + capsys.readouterr().out
    assert "fallbacks has 1 step but retries=0: no retry can use it; set retries=1" in logged


def test_a_good_ladder_warns_nothing() -> None:
    good = GangTrainingOperator(**GOOD, min_size=2, retries=2, fallbacks=[ShrinkTo(2), OtherZone("b")])
    assert good.argument_warnings() == []


@pytest.mark.parametrize(
    ("arguments", "warned"),
    [
        pytest.param({"retries": 0}, True, id="no-retries"),
        pytest.param({"retries": 1, "fallbacks": [OtherZone("b")]}, True, id="no-step-answers-it"),
        pytest.param({"retries": 1}, False, id="default-ladder-retries-as-is"),
        pytest.param({"retries": 2, "fallbacks": [OtherZone("b"), RetryAsIs()]}, False, id="retry-as-is-in-ladder"),
    ],
)
def test_retry_on_exit_codes_nothing_answers_is_warned(arguments: dict[str, Any], warned: bool) -> None:
    op = GangTrainingOperator(**GOOD, retry_on_exit_codes=[143], **arguments)
    assert any("retry_on_exit_codes is set" in warning for warning in op.argument_warnings()) is warned


def test_exit_codes_from_a_generator_are_read_once() -> None:
    op = GangTrainingOperator(**GOOD, retry_on_exit_codes=(code for code in (137, 143)), fail_on_exit_codes={2})
    assert op.build_spec("g-t1-abc").retry_on_exit_codes == frozenset({137, 143})
    configured = op.try_settings().configured
    assert configured is not None and configured.retry_on_exit_codes == frozenset({137, 143})
