"""``@task.gang`` when the DAG file is parsed: it takes every operator argument, refuses each bad one
exactly as the operator does, refuses a misspelt one when the decorator is applied, and describes
the same gang as the operator with the same arguments (no cluster in these tests)."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any

import pytest
from airflow.sdk import task

from airflow_provider_gang.decorators.gang import GENERATED, GangDecoratedOperator, gang_task
from airflow_provider_gang.member import function_call
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.checkpoint import PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.fallback import LeaveReservation, OnDemand, OtherZone, RetryAsIs, ShrinkTo
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from tests.unit.operators.test_arguments import GOOD, PARSE_TIME_CASES


def add(a: int, b: int = 1) -> dict[str, int]:
    import os

    return {"sum": a + b, "rank": int(os.environ["GANG_RANK"])}


def decorated(**arguments: Any) -> GangDecoratedOperator:
    """The operator ``@task.gang(**arguments)`` makes for ``add(2, b=3)``."""
    return task.gang(**arguments)(add)(2, b=3).operator  # type: ignore[no-any-return]


def test_task_gang_is_the_provider_s_decorator() -> None:
    op = decorated(**GOOD)
    assert type(op) is GangDecoratedOperator and isinstance(op, GangTrainingOperator)
    assert (op.task_id, op.op_args, op.op_kwargs) == ("train", (2,), {"b": 3})


@pytest.mark.parametrize(("overrides", "argument"), [pytest.param(o, a, id=i) for i, o, a in PARSE_TIME_CASES])
def test_a_bad_argument_is_refused_at_parse_time_as_the_operator_refuses_it(
    overrides: dict[str, Any], argument: str
) -> None:
    with pytest.raises(GangArgumentError) as by_operator:
        GangTrainingOperator(**{**GOOD, **overrides})
    with pytest.raises(GangArgumentError) as by_decorator:
        decorated(**{**GOOD, **overrides})
    assert by_decorator.value.argument == by_operator.value.argument == argument
    if argument not in GENERATED:  # the decorator refuses those whatever their value
        assert str(by_decorator.value) == str(by_operator.value)


@pytest.mark.parametrize(
    ("misspelt", "said"),
    [
        ("sizee", "'sizee' (did you mean 'size'?)"),
        ("reservaton", "'reservaton' (did you mean 'reservation'?)"),
        ("retrys", "'retrys' (did you mean 'retries'?)"),
        ("gpu_count", "'gpu_count'"),
    ],
)
def test_a_misspelt_argument_is_a_type_error_when_the_decorator_is_applied(misspelt: str, said: str) -> None:
    with pytest.raises(TypeError, match=r"@task\.gang got unknown argument") as caught:
        task.gang(**{**GOOD, misspelt: 1})
    assert said in str(caught.value)


@pytest.mark.parametrize("generated", ["command", "args"])
def test_command_and_args_are_written_by_the_decorator(generated: str) -> None:
    with pytest.raises(GangArgumentError, match=r"is written by @task\.gang") as caught:
        gang_task(**GOOD, **{generated: ["x"]})
    assert caught.value.argument == generated


def test_base_operator_arguments_are_accepted() -> None:
    op = decorated(**GOOD, retries=3, retry_delay=timedelta(seconds=5), pool="gpus", multiple_outputs=True)
    assert (op.retries, op.pool, op.multiple_outputs) == (3, "gpus", True)


def test_a_function_whose_source_cannot_be_read_is_refused_at_parse_time() -> None:
    namespace: dict[str, Any] = {}
    exec("def hidden():\n    return 1\n", namespace)  # no file behind it: inspect.getsource fails
    with pytest.raises(GangArgumentError, match=r"the source of hidden\(\) cannot be read") as caught:
        task.gang(**GOOD)(namespace["hidden"])()
    assert caught.value.argument == "python_callable"


def test_once_rendered_the_member_runs_the_call() -> None:
    op = decorated(**GOOD)
    settings = op.try_settings()
    assert settings.argument_error is None and settings.rank_zero_returns
    assert settings.configured is not None
    container = settings.configured.pod_template["spec"]["containers"][0]
    assert container["command"][:2] == ["python3", "-c"] and container["args"][0] == "/dev/termination-log"
    call = function_call.decode_call(container["args"][1])
    assert (call["name"], call["args"], call["kwargs"]) == ("add", [2], {"b": 3})
    assert call["source"].startswith("def add(a: int, b: int = 1)") and "@task.gang" not in call["source"]


def test_a_rendered_argument_that_cannot_be_sent_ends_the_try_as_invalid() -> None:
    op = decorated(**GOOD)
    op.op_kwargs = {"b": lambda: 3}  # what rendering an argument could leave
    settings = op.try_settings()
    assert settings.configured is None and settings.argument_error is not None
    assert settings.argument_error.argument == "op_kwargs['b']"


EVERY_KIND = [
    pytest.param({}, id="defaults"),
    pytest.param({"reservation": "gates", "provisioning_class": "queued-provisioning.gke.io"}, id="gates"),
    pytest.param({"reservation": "kueue", "kueue_queue": "team-a", "min_size": 2}, id="kueue"),
    pytest.param({"reservation": "workload"}, id="workload"),
    pytest.param({"reservation": "auto"}, id="auto"),
    pytest.param(
        {
            "fallbacks": [OtherZone("us-central1-b"), ShrinkTo(2), RetryAsIs()],
            "zone": "us-central1-a",
            "min_size": 2,
            "retries": 3,
        },
        id="fallbacks",
    ),
    pytest.param({"start_by": timedelta(hours=4), "run_timeout": 600, "startup_timeout": 60}, id="time-limits"),
    pytest.param({"checkpoint": "gs://bucket/{{ run_id }}", "spot": True, "fallbacks": [OnDemand()]}, id="spot"),
    pytest.param({"checkpoint": PersistentVolumeCheckpoint(claim="ckpt"), "cloud": "eks"}, id="claim-on-eks"),
    pytest.param(
        {"use_reservation": "a100-res", "fallbacks": [LeaveReservation()], "retry_on_exit_codes": [143]},
        id="reservation",
    ),
    pytest.param({"distributed": "jax", "labels": {"team": "ml"}, "client_options": {"qps": 5}}, id="jax"),
]


@pytest.mark.parametrize("arguments", EVERY_KIND)
def test_every_operator_argument_describes_the_same_gang_on_the_decorator(arguments: dict[str, Any]) -> None:
    plain = GangTrainingOperator(**GOOD, **arguments).try_settings()
    made = decorated(**GOOD, **arguments).try_settings()
    assert plain.argument_error is None and made.argument_error is None
    assert plain.configured is not None and made.configured is not None
    spec = made.configured.to_dict()
    for container in spec["pod_template"]["spec"]["containers"]:
        del container["command"], container["args"]
    assert spec == plain.configured.to_dict()
    ignored = {"configured", "log", "rank_zero_returns"}
    fields = [item.name for item in dataclasses.fields(plain) if item.name not in ignored]
    assert {name: getattr(made, name) for name in fields} == {name: getattr(plain, name) for name in fields}


def test_the_decorator_accepts_every_argument_of_the_record() -> None:
    from airflow_provider_gang.decorators import gang

    assert set(argument_record.names()) - set(GENERATED) <= gang.known_arguments()


def test_the_docs_table_of_the_decorator_lists_every_argument_it_takes_from_the_record() -> None:
    from airflow_provider_gang.decorators.gang import markdown_argument_tables

    listed = re.findall(r"^\| `(\w+)` \|", markdown_argument_tables(), flags=re.M)
    assert sorted(listed) == sorted(set(argument_record.names()) - set(GENERATED))
