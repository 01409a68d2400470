"""The argument record and the tables rendered from it (the docs' argument and configuration tables)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from airflow_provider_gang.reservation import deployment
from airflow_provider_gang.reservation.tries import argument_record, argument_table
from airflow_provider_gang.reservation.tries.argument_record import REQUIRED, arguments_of
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError


def test_missing_and_unknown_arguments_are_type_errors_naming_them() -> None:
    with pytest.raises(TypeError, match=r"missing GangTrainingOperator argument\(s\): size"):
        arguments_of(image="i")
    with pytest.raises(TypeError, match=r"'sizee' \(did you mean 'size'\?\), 'zzz'"):
        arguments_of(size=1, sizee=2, zzz=3)
    values = arguments_of({"size": 2}, image="i")
    assert values.size == 2 and values["startup_timeout"] == timedelta(minutes=10) and len(values) == 42
    assert list(values) == list(argument_record.names())
    with pytest.raises(AttributeError):
        values.sizee  # noqa: B018


def test_unknown_accepts_extra_known_names() -> None:
    assert argument_record.unknown(["task_id", "size", "retrys"], also_known=["task_id", "retries"]) == [
        "'retrys' (did you mean 'retries'?)"
    ]


def test_lookups() -> None:
    assert argument_record.default("size") is REQUIRED and repr(REQUIRED) == "required"
    assert argument_record.normalised("startup_timeout", 90) == timedelta(seconds=90)
    assert argument_record.normalised("labels", None) == {} and argument_record.normalised("labels", "x") == "x"
    assert argument_record.normalised("image", "i") == "i"
    assert argument_record.argument_of_spec_field("queue") == "kueue_queue"
    assert argument_record.argument_of_spec_field("pod_template.spec") == "pod_template.spec"
    assert "pod_template" in argument_record.templated_names()
    settings = argument_record.try_settings(arguments_of(size=3, image="i"))
    assert settings["mode"] == "provisioning_request" and settings["size"] == 3
    assert argument_record.BY_NAME["zone"].stand_in("{{ params.zone }}") == "zone"
    assert argument_record.BY_NAME["zone"].stand_in("us-central1-a") == "us-central1-a"


def test_every_group_has_arguments_and_every_argument_a_group() -> None:
    assert {argument.group for argument in argument_record.ARGUMENTS} == set(argument_record.GROUPS)


def test_the_rst_table_lists_every_argument_with_its_default() -> None:
    table = argument_table.argument_table("rst")
    assert table.startswith(".. list-table::\n   :header-rows: 1\n")
    assert "   * - ``startup_timeout``\n     - ``timedelta | float``\n     - 10 minutes\n" in table
    assert "   * - ``size``\n     - ``int``\n     - required\n" in table
    assert "``[operators] default_deferrable`` (else ``False``)" in table
    assert "     - ``[gang] default_cloud``\n" in table
    assert table.count("   * - ``") == len(argument_record.ARGUMENTS)


def test_a_markdown_table_of_one_group_escapes_its_pipes() -> None:
    table = argument_table.argument_table("markdown", group="time")
    lines = table.splitlines()
    assert lines[0] == "| Argument | Type | Default | Templated | Meaning |" and lines[1] == "|---|---|---|---|---|"
    assert "| `run_timeout` | `timedelta \\| float \\| None` | `None` | no |" in table
    assert len(lines) == 2 + 5


def test_a_group_whose_every_argument_is_left_out_loses_its_title_too() -> None:
    time_group = [argument.name for argument in argument_record.ARGUMENTS if argument.group == "time"]
    tables = argument_table.argument_tables("markdown", without=time_group)
    assert f"**{argument_record.GROUPS['time']}**" not in tables
    assert f"**{argument_record.GROUPS['pod']}**" in tables and "`run_timeout`" not in tables
    with pytest.raises(ValueError, match="no such argument"):
        argument_table.argument_tables(without=["nope"])


def test_a_wrong_style_or_group_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown table style 'html'"):
        argument_table.argument_table("html")
    with pytest.raises(ValueError, match="unknown group 'nope'"):
        argument_table.argument_table(group="nope")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (timedelta(hours=2), "2 hours"),
        (timedelta(hours=1), "1 hour"),
        (timedelta(minutes=90), "90 minutes"),
        (timedelta(seconds=45), "45 seconds"),
        (timedelta(seconds=1.5), "1.5 seconds"),
    ],
)
def test_durations_are_shown_in_whole_units(value: timedelta, shown: str) -> None:
    assert argument_table.describe_duration(value) == shown


def test_the_configuration_table_lists_every_option_with_its_variable() -> None:
    table = argument_table.configuration_table("markdown")
    assert "| `client_retry_attempts` | integer | `10` | `AIRFLOW__GANG__CLIENT_RETRY_ATTEMPTS` |" in table
    assert table.count("\n| `") == len(deployment.OPTIONS)


def test_parameter_fields_group_every_argument() -> None:
    fields = argument_table.parameter_fields()
    assert fields.count(":param ") == len(argument_record.ARGUMENTS)
    assert ":param namespace: The namespace of every object of the gang. (default: ``'default'``, templated)" in fields
    assert "Time limits (each a timedelta or a number of seconds):" in fields


def test_the_tables_of_every_group_list_every_argument_once_under_its_title() -> None:
    tables = argument_table.argument_tables("markdown")
    titles = [line.strip("*") for line in tables.splitlines() if line.startswith("**")]
    assert titles == list(argument_record.GROUPS.values())
    assert tables.count("\n| `") == len(argument_record.ARGUMENTS)
    assert argument_table.markdown_argument_tables() == tables
    assert argument_table.argument_tables("rst").count("   * - ``") == len(argument_record.ARGUMENTS)


def test_the_tables_leave_out_the_arguments_named_and_refuse_an_unknown_one() -> None:
    tables = argument_table.argument_tables("markdown", without=("command", "args"))
    assert "| `command` |" not in tables and "| `args` |" not in tables and "| `image` |" in tables
    assert tables.count("\n| `") == len(argument_record.ARGUMENTS) - 2
    with pytest.raises(ValueError, match="no such argument"):
        argument_table.argument_tables(without=("comand",))


def test_the_markdown_configuration_table_is_the_one_the_docs_show() -> None:
    assert argument_table.markdown_configuration_table() == argument_table.configuration_table("markdown")


def documented_env_names() -> dict[str | None, list[str]]:
    """The names ``env``'s doc says are refused, by the ``distributed`` value they are refused with."""
    doc = argument_record.BY_NAME["env"].doc
    always, torch_part = doc.split('with ``distributed="torch"``')
    torch, jax = torch_part.split('with ``"jax"``')
    return {key: re.findall(r"``([A-Z_]+)``", text) for key, text in ((None, always), ("torch", torch), ("jax", jax))}


@pytest.mark.parametrize(
    ("distributed", "name"),
    [(distributed, name) for distributed, names in documented_env_names().items() for name in names],
)
def test_every_env_name_the_doc_lists_is_refused(distributed: str | None, name: str) -> None:
    arguments = arguments_of(size=2, image="i", distributed=distributed, env={name: "1"})
    with pytest.raises(GangArgumentError) as refused:
        argument_record.check_arguments(arguments, rendered=True)
    assert refused.value.argument == "env"
    if distributed is not None:  # refused with its framework only
        argument_record.check_arguments(arguments_of(size=2, image="i", env={name: "1"}), rendered=True)


def test_the_env_doc_lists_every_name_the_provider_sets_for_every_framework() -> None:
    from airflow_provider_gang.reservation.manifests.rank_env import PROVIDER_VARIABLES
    from airflow_provider_gang.reservation.tries.arguments import RANK_ENVIRONMENT

    documented = documented_env_names()
    assert set(documented[None]) == PROVIDER_VARIABLES
    assert {key: set(documented[key]) for key in RANK_ENVIRONMENT} == {
        key: set(names) for key, names in RANK_ENVIRONMENT.items()
    }
