"""``distributed="jax"`` cannot run with Kueue partial admission (no elastic rendezvous): refused when
the DAG is parsed, naming ``min_size`` and ``distributed`` and the fix; every neighbouring
combination is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

KUEUE: dict[str, Any] = {
    "task_id": "train",
    "image": "trainer:1",
    "size": 4,
    "gpus": 1,
    "reservation": "kueue",
    "kueue_queue": "team-a",
}


def test_jax_with_partial_admission_is_refused_at_parse_time() -> None:
    with pytest.raises(GangArgumentError) as caught:
        GangTrainingOperator(**KUEUE, min_size=2, distributed="jax")
    error = caught.value
    assert error.argument == "min_size"
    assert "min_size=2 < size=4" in error.problem and "distributed='jax'" in error.problem
    assert "set min_size=4" in error.fix and "distributed='torch'" in error.fix


@pytest.mark.parametrize(
    "overrides",
    [
        {"min_size": 4, "distributed": "jax"},
        {"distributed": "jax"},
        {"min_size": 2, "distributed": "torch"},
        {"min_size": 2},
        {"reservation": "provisioning_request", "kueue_queue": None, "min_size": 2, "distributed": "jax"},
    ],
    ids=["jax-min-equals-size", "jax-no-min", "torch-partial", "plain-partial", "jax-shrink-floor-elsewhere"],
)
def test_neighbouring_combinations_are_accepted(overrides: dict[str, Any]) -> None:
    operator = GangTrainingOperator(**{**KUEUE, **overrides})
    assert operator.build_spec("train-t1-abc").size == 4


def test_render_time_check_refuses_it_too() -> None:
    operator = GangTrainingOperator(**KUEUE, distributed="jax")
    operator.min_size = 3  # a value changed after parsing is judged again before the try starts
    with pytest.raises(GangArgumentError, match=r"jax\.distributed\.initialize has no elastic rendezvous"):
        operator.check_arguments(rendered=True)
