"""``reservation="auto"`` arguments: valid for both modes a try may choose (``gates``, ``workload``),
refused at parse time naming the argument where either choice could not use it."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import OnDemand, OtherProvisioningClass, OtherQueue, ShrinkTo
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

AUTO: dict[str, Any] = {"task_id": "train", "image": "trainer:1", "size": 4, "gpus": 1, "reservation": "auto"}


def test_an_auto_gang_is_checked_and_planned_in_both_modes() -> None:
    operator = GangTrainingOperator(**AUTO, min_size=2, fallbacks=[ShrinkTo(2), OnDemand()], spot=True, retries=2)
    gates, workload = operator.candidate_specs("train-t1-abc")
    assert (gates.mode, gates.provisioning_class) == (
        ReservationMode.GATES,
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    assert (workload.mode, workload.provisioning_class) == (ReservationMode.WORKLOAD, None)
    assert operator.build_spec("train-t1-abc") == gates  # a try is planned as gates, then chooses
    settings = operator.try_settings()
    assert settings.auto_reservation and settings.argument_error is None
    assert settings.configured is not None and settings.configured.mode is ReservationMode.GATES


def test_a_fixed_mode_has_one_candidate() -> None:
    operator = GangTrainingOperator(**{**AUTO, "reservation": "workload"})
    (only,) = operator.candidate_specs("train-t1-abc")
    assert only.mode is ReservationMode.WORKLOAD and not operator.try_settings().auto_reservation


@pytest.mark.parametrize(
    ("overrides", "argument", "named"),
    [
        pytest.param(
            {"provisioning_class": "queued-provisioning.gke.io"},
            "provisioning_class",
            "reservation='gates'",
            id="class",
        ),
        pytest.param(
            {"provisioning_parameters": {"team": "vision"}},
            "provisioning_parameters",
            "reservation='auto' may choose 'workload'",
            id="parameters",
        ),
        pytest.param(
            {"fallbacks": [OtherProvisioningClass("queued-provisioning.gke.io")], "retries": 1},
            "fallbacks",
            "reservation='auto' may choose 'workload', and then: step 1 (other provisioning class",
            id="class-step",
        ),
        pytest.param(
            {"fallbacks": [OtherQueue("team-b")], "retries": 1},
            "fallbacks",
            "needs reservation='kueue'",
            id="queue-step",
        ),
        pytest.param({"kueue_queue": "team-a"}, "kueue_queue", "only used by reservation='kueue'", id="queue"),
    ],
)
def test_what_only_one_choice_can_use_is_refused_at_parse_time(
    overrides: dict[str, Any], argument: str, named: str
) -> None:
    with pytest.raises(GangArgumentError) as caught:
        GangTrainingOperator(**AUTO, **overrides)
    assert caught.value.argument == argument
    assert named in str(caught.value)


def test_an_unknown_mode_lists_auto_among_the_choices() -> None:
    with pytest.raises(GangArgumentError, match="auto"):
        GangTrainingOperator(**{**AUTO, "reservation": "gang"})
