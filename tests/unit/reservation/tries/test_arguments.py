"""The operator-level argument checks, table-driven: each row one invalid argument, named with its fix;
Jinja is judged only once rendered."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import OtherQueue, OtherZone, ShrinkTo
from airflow_provider_gang.reservation.tries.argument_record import arguments_of, check_arguments
from airflow_provider_gang.reservation.tries.arguments import (
    GangArgumentError,
    as_duration,
    as_exit_codes,
    check_fallbacks_shape,
    has_jinja,
)

GOOD: dict[str, Any] = {"size": 4, "image": "trainer:1"}

REFUSED = [
    ("no-pod", {"image": None}, "image", "no pod to run"),
    ("two-pods", {"pod_template": {"spec": {}}}, "pod_template", "conflicts with image"),
    ("image-not-a-string", {"image": 7}, "image", "must be a string"),
    ("template-file-not-a-path", {"image": None, "pod_template_file": 3}, "pod_template_file", "must be a path"),
    ("command-one-string", {"command": "python train.py"}, "command", "single string"),
    ("args-not-strings", {"args": ["--epochs", 3]}, "args", "list of strings"),
    ("env-not-a-mapping", {"env": ["A=1"]}, "env", "must be a mapping"),
    ("env-bad-name", {"env": {"1A": "x"}}, "env", "not a valid environment variable name"),
    ("env-not-a-string", {"env": {"EPOCHS": 3}}, "env", "must be a string"),
    ("env-rank-variable", {"env": {"RANK": "0"}, "distributed": "torch"}, "env", "set by the operator"),
    ("env-gang-variable", {"env": {"GANG_RESUME": "1"}}, "env", "GANG_RESUME is set by the provider"),
    ("unknown-framework", {"distributed": "mpi"}, "distributed", "unknown framework"),
    ("unknown-mode", {"reservation": "magic"}, "reservation", "unknown mode"),
    ("class-with-kueue", {"reservation": "kueue", "provisioning_class": "x"}, "provisioning_class", "kueue"),
    ("class-with-workload", {"reservation": "workload", "provisioning_class": "x"}, "provisioning_class", "workload"),
    ("class-with-auto", {"reservation": "auto", "provisioning_class": "x"}, "provisioning_class", "'gates'"),
    ("step-of-another-mode", {"fallbacks": (OtherQueue("q"),)}, "fallbacks", "needs reservation"),
    (
        "jax-partial-admission",
        {"reservation": "kueue", "distributed": "jax", "min_size": 2},
        "min_size",
        "fixed process count",
    ),
    ("timeout-not-a-duration", {"reservation_timeout": "1h"}, "reservation_timeout", "datetime.timedelta"),
    ("timeout-a-bool", {"startup_timeout": True}, "startup_timeout", "datetime.timedelta"),
    ("timeout-not-positive", {"run_timeout": timedelta(0)}, "run_timeout", "must be positive"),
    ("unreachable-missing", {"unreachable_timeout": None}, "unreachable_timeout", "datetime.timedelta"),
    ("start-by-negative", {"start_by": timedelta(hours=-1)}, "start_by", "must be positive"),
    ("on-finish", {"on_finish": "archive"}, "on_finish", "'delete' or 'keep'"),
    ("log-ranks-a-string", {"log_ranks": "0"}, "log_ranks", "list of ranks or 'all'"),
    ("log-ranks-not-a-rank", {"log_ranks": [True]}, "log_ranks", "is not a rank"),
    ("log-ranks-negative", {"log_ranks": [-1]}, "log_ranks", "is not a rank"),
    ("log-ranks-beyond-size", {"log_ranks": [4]}, "log_ranks", "does not exist in a gang of size 4"),
    ("deferrable", {"deferrable": "yes"}, "deferrable", "True or False"),
    ("connection-id", {"kubernetes_conn_id": " "}, "kubernetes_conn_id", "non-empty connection id"),
    ("client-options-a-list", {"client_options": [("qps", 1)]}, "client_options", "must be a mapping"),
    ("client-options-unknown", {"client_options": {"retries": 3}}, "client_options", "unknown client option"),
    (
        "multikueue-connections-not-a-mapping",
        {"reservation": "kueue", "multikueue_connections": '{"worker-1": "kube_worker1"}'},
        "multikueue_connections",
        "must map cluster names",
    ),
    (
        "multikueue-connections-bad-cluster",
        {"reservation": "kueue", "multikueue_connections": {"Worker 1": "kube_worker1"}},
        "multikueue_connections",
        "not a MultiKueueCluster name",
    ),
    (
        "multikueue-connections-outside-kueue",
        {"multikueue_connections": {"worker-1": "kube_worker1"}},
        "multikueue_connections",
        "applies to reservation='kueue' only",
    ),
]


@pytest.mark.parametrize(
    ("arguments", "argument", "said"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED]
)
def test_an_invalid_argument_is_named_with_its_fix(arguments: dict[str, Any], argument: str, said: str) -> None:
    with pytest.raises(GangArgumentError, match=said) as caught:
        check_arguments(arguments_of(GOOD, **arguments), rendered=True)
    assert caught.value.argument == argument and caught.value.fix


ACCEPTED = [
    ("defaults", {}),
    ("template-file", {"image": None, "pod_template_file": Path("/pods/member.yaml")}),
    ("env-and-torch", {"env": {"EPOCHS": "3"}, "distributed": "torch", "command": ["python"], "args": ["-u"]}),
    ("jax-fixed-size-kueue", {"reservation": "kueue", "distributed": "jax", "min_size": 4}),
    ("jax-templated-size", {"reservation": "kueue", "distributed": "jax", "min_size": "{{ params.floor }}"}),
    ("step-of-this-mode", {"reservation": "kueue", "fallbacks": (ShrinkTo(2), OtherQueue("q"))}),
    ("every-rank", {"log_ranks": "all", "run_timeout": timedelta(hours=6), "start_by": timedelta(hours=1)}),
    ("ranks-of-a-templated-size", {"size": "{{ params.size }}", "log_ranks": {0, 7}}),
    ("client-options", {"client_options": {"request_timeout": 5, "retry_attempts": 3}}),
    ("multikueue-connections", {"reservation": "kueue", "multikueue_connections": {"worker-2": "kube_worker2"}}),
]


@pytest.mark.parametrize("arguments", [row[1] for row in ACCEPTED], ids=[row[0] for row in ACCEPTED])
def test_valid_arguments_pass(arguments: dict[str, Any]) -> None:
    check_arguments(arguments_of(GOOD, **arguments), rendered=True)


def test_jinja_is_judged_only_once_rendered() -> None:
    templated = arguments_of(GOOD, command="{{ params.command }}", args="{{ params.args }}", env="{{ params.env }}")
    check_arguments(templated, rendered=False)
    with pytest.raises(GangArgumentError, match="argument 'command'"):
        check_arguments(templated, rendered=True)
    values = arguments_of(GOOD, env={"EPOCHS": "{{ params.epochs }}"})
    check_arguments(values, rendered=False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{{ x }}", True),
        ("{% if %}", True),
        ({"k": ["{{ x }}"]}, True),
        ({"{{ k }}": 1}, True),
        (("a", 1), False),
        (3, False),
    ],
)
def test_has_jinja(value: Any, expected: bool) -> None:
    assert has_jinja(value) is expected


def test_durations_and_exit_codes_are_normalised_and_anything_else_left_for_the_check() -> None:
    assert as_duration(90) == timedelta(seconds=90) and as_duration(1.5) == timedelta(seconds=1.5)
    assert as_duration(True) is True and as_duration("1h") == "1h"
    assert as_exit_codes(code for code in (2, 3)) == (2, 3)
    assert as_exit_codes("2") == "2" and as_exit_codes({2: 1}) == {2: 1}


@pytest.mark.parametrize(
    ("fallbacks", "said"),
    [
        pytest.param(ShrinkTo(2), "single step", id="one-step"),
        pytest.param("zone-b", "must be a list", id="a-string"),
        pytest.param({"zone": "b"}, "must be a list", id="a-mapping"),
        pytest.param(None, "must be a list", id="none"),
        pytest.param(["zone-b"], "step 1 is the string", id="a-zone-name"),
        pytest.param([OtherZone("b"), 3], "step 2 is 3, not a reservation.fallback step", id="not-a-step"),
    ],
)
def test_the_ladder_must_be_a_list_of_steps(fallbacks: Any, said: str) -> None:
    with pytest.raises(GangArgumentError, match=said):
        check_fallbacks_shape(fallbacks)


def test_a_ladder_becomes_a_tuple() -> None:
    assert check_fallbacks_shape([OtherZone("b"), ShrinkTo(2)]) == (OtherZone("b"), ShrinkTo(2))


def test_a_malformed_configuration_option_is_an_argument_error_naming_the_option() -> None:
    from airflow_provider_gang.reservation.deployment import ConfigurationError
    from airflow_provider_gang.reservation.tries.arguments import GangConfigurationError

    error = GangConfigurationError(ConfigurationError("heartbeat_interval", "'soon' is not a number"))
    assert isinstance(error, GangArgumentError) and error.argument == "[gang] heartbeat_interval"
    assert str(error).startswith("Airflow configuration [gang] heartbeat_interval: 'soon' is not a number")
