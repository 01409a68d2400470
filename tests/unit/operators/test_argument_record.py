"""The operator, its decorated form and a try's settings read the one argument record: they cannot drift.

The operator's ``__init__`` keeps explicit keyword arguments (what users and mypy see); this test holds
their names, order, annotations and defaults to ``reservation.tries.argument_record.ARGUMENTS``, so a
new argument or a changed default that is not in the record fails here.
"""

from __future__ import annotations

import dataclasses
import inspect

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.settings import TrySettings
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries import argument_record
from airflow_provider_gang.reservation.tries.argument_record import ARGUMENTS, REQUIRED

SIGNATURE = inspect.signature(GangTrainingOperator.__init__)
PARAMETERS = [parameter for name, parameter in SIGNATURE.parameters.items() if name not in ("self", "kwargs")]


def test_the_signature_names_every_argument_of_the_record_in_its_order() -> None:
    assert [parameter.name for parameter in PARAMETERS] == list(argument_record.names())
    assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY for parameter in PARAMETERS)


def test_the_signature_annotations_are_the_record_types() -> None:
    # ``from __future__ import annotations``: the signature holds each annotation as written.
    assert {parameter.name: parameter.annotation for parameter in PARAMETERS} == {
        argument.name: argument.annotation for argument in ARGUMENTS
    }


def test_the_signature_defaults_are_the_record_defaults() -> None:
    from airflow_provider_gang.airflow_compat import conf

    for parameter, argument in zip(PARAMETERS, ARGUMENTS, strict=True):
        if argument.default is REQUIRED:
            assert parameter.default is inspect.Parameter.empty, argument.name
        elif argument.name == "deferrable":  # read from Airflow's configuration when the class is defined
            assert parameter.default == conf.getboolean("operators", "default_deferrable", fallback=argument.default)
        else:
            assert parameter.default is argument.default, argument.name


def test_the_templated_fields_are_the_record_templated_arguments() -> None:
    assert tuple(GangTrainingOperator.template_fields) == argument_record.templated_names()
    assert {"pod_template", "pod_template_file"} <= set(GangTrainingOperator.template_fields)


def test_the_record_names_real_fields_of_the_gang_spec_and_the_try_settings() -> None:
    spec_fields = {item.name for item in dataclasses.fields(GangSpec)}
    settings_fields = {item.name for item in dataclasses.fields(TrySettings)}
    assert {argument.spec_field for argument in ARGUMENTS if argument.spec_field} <= spec_fields
    assert {argument.try_setting for argument in ARGUMENTS if argument.try_setting} <= settings_fields


def test_the_operator_stores_every_argument_as_the_record_normalises_it() -> None:
    operator = GangTrainingOperator(task_id="t", image="i", size=2, startup_timeout=90, retry_on_exit_codes=[3])
    values = operator.argument_values()
    assert dict(values) == {name: getattr(operator, name) for name in argument_record.names()}
    assert values.startup_timeout.total_seconds() == 90 and values.retry_on_exit_codes == (3,)
    assert values.labels == {} and values.client_options == {}


def test_the_docstring_lists_every_argument() -> None:
    doc = GangTrainingOperator.__doc__ or ""
    assert all(f":param {argument.name}:" in doc for argument in ARGUMENTS)
