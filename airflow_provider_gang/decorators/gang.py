"""``@task.gang``: a Python function run on every member of a gang; rank 0's return value is the task's.

Modelled on cncf-kubernetes' ``@task.kubernetes`` (``airflow/providers/cncf/kubernetes/decorators/
kubernetes.py``): the decorated operator subclasses ``GangTrainingOperator`` and Airflow's
``DecoratedOperator`` and forwards ``**kwargs``, so it takes every operator argument
(``reservation.tries.argument_record``) - reservation modes, fallbacks, ``start_by``, ``checkpoint``... -
and refuses a bad one when the DAG is parsed exactly as the operator does. It declares no argument of
its own; ``command`` and ``args`` are refused, since they are what it generates.

::

    @task.gang(image="python:3.11-slim", size=3, distributed="torch")
    def train(epochs: int) -> dict:
        import os
        ...  # runs in every member, with the operator's rank environment (GANG_RANK, RANK, WORLD_SIZE...)
        return {"loss": 0.1}  # rank 0's return value becomes the task's XCom return_value

How the call travels and how rank 0's value comes back (one JSON log line of at most 1 MiB) is
``member.function_call``. Like ``@task.kubernetes``: the function must import what it uses inside
its body (it runs from its source in a fresh namespace), its arguments are pickled (the image needs
the modules of their types) and rendered first (``op_args``/``op_kwargs`` are templated, XCom
arguments resolved), and Airflow's context is not passed. The image needs ``python3`` (3.8 or later).
The gang's summary, the operator's return value, is pushed as the XCom ``gang_summary``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory
from airflow.sdk.bases.operator import BaseOperator

from airflow_provider_gang.member import function_call
from airflow_provider_gang.operators.training import GangTrainingOperator
from airflow_provider_gang.reservation.tries import argument_record, argument_table
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

GENERATED = ("command", "args")
"""Operator arguments ``@task.gang`` writes itself: the member runs the decorated function."""
DECORATOR_NAME = "@task.gang"


class GangDecoratedOperator(DecoratedOperator, GangTrainingOperator):  # type: ignore[misc]
    """The operator ``@task.gang`` creates (module docstring)."""

    custom_operator_name = DECORATOR_NAME
    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *(name for name in GangTrainingOperator.template_fields if name not in GENERATED),
    )
    # The callable is never changed; some objects cannot be deep-copied (as @task.kubernetes says).
    shallow_copy_attrs: Sequence[str] = ("python_callable",)
    rank_zero_returns: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        refuse_generated(kwargs)
        super().__init__(**kwargs)
        self.function_source()  # refused now if Airflow cannot send the function

    def function_source(self) -> str:
        """The function's source as the members run it; ``GangArgumentError`` when it cannot be read."""
        try:
            source: Any = self.get_python_source()  # type: ignore[no-untyped-call]
        except (OSError, TypeError) as error:
            raise GangArgumentError(
                "python_callable",
                f"the source of {self.python_callable.__name__}() cannot be read ({error}); "
                f"{DECORATOR_NAME} sends the function's source to every member",
                "define the function in the DAG file (or a module) with def",
            ) from error
        return str(source)

    def check_arguments(self, *, rendered: bool) -> None:
        """The operator's checks; once rendered, the trainer's ``command`` and ``args`` first become
        the call of the function with its rendered arguments, so a call that cannot be sent (an
        argument that cannot be pickled, a call too long) is refused as an invalid argument is."""
        if rendered:
            try:
                encoded = function_call.encode_call(
                    self.function_source(), self.python_callable.__name__, self.op_args, self.op_kwargs
                )
            except function_call.CallError as error:
                raise GangArgumentError(error.argument, str(error)) from error
            self.command, self.args = function_call.member_command(encoded)
        super().check_arguments(rendered=rendered)


def refuse_generated(kwargs: dict[str, Any]) -> None:
    """``GangArgumentError`` for an argument ``@task.gang`` writes itself (:data:`GENERATED`)."""
    for name in GENERATED:
        if name in kwargs:
            raise GangArgumentError(
                name,
                f"is written by {DECORATOR_NAME}: every member runs the decorated function",
                "remove it; pass the function's inputs as its arguments",
            )


def known_arguments() -> frozenset[str]:
    """What ``@task.gang(...)`` accepts: the operator's arguments, ``BaseOperator``'s (``retries``,
    ``retry_delay``...) and those of Airflow's decorator machinery."""
    machinery = {"multiple_outputs", "on_failure_fail_dagrun", "kwargs_to_upstream"}
    parameters = inspect.signature(BaseOperator.__init__).parameters
    return frozenset({*argument_record.names(), *parameters, *machinery} - {"self", "kwargs"} - set(GENERATED))


def markdown_argument_tables() -> str:
    """``@task.gang``'s arguments as the docs show them (``docs/decorator.md``): the operator's, group by
    group, less the :data:`GENERATED` ones."""
    return argument_table.argument_tables("markdown", without=GENERATED)


def gang_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """``@task.gang(**operator_arguments)``: run the function on every member of a gang (module docstring).

    A keyword that is no argument (a misspelling) is a ``TypeError`` naming it, with the nearest
    known name, when the decorator is applied - when the DAG file is imported.
    """
    refuse_generated(kwargs)
    wrong = argument_record.unknown(kwargs, also_known=known_arguments())
    if wrong:
        raise TypeError(f"{DECORATOR_NAME} got unknown argument(s): {', '.join(wrong)}")
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=GangDecoratedOperator,
        **kwargs,
    )
