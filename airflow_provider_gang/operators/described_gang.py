"""The gang a ``GangTrainingOperator``'s arguments describe, as ``reservation.spec.GangSpec``.

Built at parse time with stand-ins for values that still hold Jinja (so every other argument is
checked when the DAG is parsed), and per try after Airflow rendered the templated fields. Every
``GangSpecError`` becomes a ``GangArgumentError`` naming the operator argument a user wrote
(``kueue_queue``, not the spec's ``queue``). A ``reservation="auto"`` gang is checked in both modes
a try may choose (``reservation.tries.auto_mode``) and planned as ``gates``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from airflow_provider_gang.operators.settings import DEFAULT_PROVISIONING_CLASS, cloud_profile
from airflow_provider_gang.reservation import checkpoint as checkpoints
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.spec import GangSpec, GangSpecError, MemberResources, ReservationMode
from airflow_provider_gang.reservation.tries import argument_record, auto_mode
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from airflow_provider_gang.reservation.tries.member_template import build_member_template


class GangArguments(Protocol):
    """What of a ``GangTrainingOperator`` describes its gang: its arguments' values by name, as given
    or rendered (``reservation.tries.argument_record.names()``)."""

    def argument_values(self) -> Mapping[str, Any]: ...


def argument_of_field(field: str) -> str:
    """GangSpec field -> the operator argument a user wrote (``queue`` -> ``kueue_queue``)."""
    return argument_record.argument_of_spec_field(field)


def described_values(operator: GangArguments, *, stand_ins: bool) -> dict[str, Any]:
    """Every argument's value; with ``stand_ins``, each templated one through its record's stand-in
    (a value that still holds Jinja becomes a valid neutral one), so every other argument can be
    checked at parse time. A pod source that stood in (a templated ``pod_template`` or file path)
    leaves a stand-in image: its content is checked after rendering."""
    values = dict(operator.argument_values())
    if not stand_ins:
        return values
    sources = ("image", "pod_template", "pod_template_file")
    had_source = any(values[name] is not None for name in sources)
    for name in argument_record.templated_names():
        values[name] = argument_record.BY_NAME[name].stand_in(values[name])
    if had_source and all(values[name] is None for name in sources):
        values["image"] = "image"
    return values


def candidate_specs(
    operator: GangArguments, name: str, *, stand_ins: bool = False, cloud: CloudProfile | None = None
) -> tuple[GangSpec, ...]:
    """The gang in every mode a try may run in (``auto``: ``gates``, then ``workload``; else the
    one mode), each checked; the first is the one a try is planned with."""
    modes = auto_mode.CANDIDATE_MODES if operator.argument_values()["reservation"] == auto_mode.AUTO else (None,)
    return tuple(build_spec(operator, name, stand_ins=stand_ins, cloud=cloud, mode=mode) for mode in modes)


def refusal(operator: GangArguments, argument: str, mode: ReservationMode | None, message: str) -> GangArgumentError:
    """The error for ``argument`` of the gang in ``mode``, saying so when only ``auto``'s choice of
    that mode refuses it."""
    if operator.argument_values()["reservation"] == auto_mode.AUTO and mode not in (None, auto_mode.CONFIGURED_MODE):
        assert mode is not None
        return GangArgumentError(
            argument,
            f"reservation='auto' may choose {mode.value!r}, and then: {message}",
            "remove it, or use reservation='gates' for a gang that needs it",
        )
    return GangArgumentError(argument, message)


def build_spec(
    operator: GangArguments,
    name: str,
    *,
    stand_ins: bool = False,
    cloud: CloudProfile | None = None,
    mode: ReservationMode | None = None,
) -> GangSpec:
    """The gang as the arguments describe it, before any fallback step, named ``name``, on ``cloud``
    (default: the ``cloud`` argument's profile, else GKE's until the connection is read), in
    ``mode`` (default: the ``reservation`` argument's; ``auto`` is planned as ``gates``)."""
    values = described_values(operator, stand_ins=stand_ins)
    cloud = cloud or cloud_profile(values["cloud"] or "gke", values["kubernetes_conn_id"])
    provisioning_class = values["provisioning_class"]
    if values["reservation"] == auto_mode.AUTO:
        mode = mode or auto_mode.CONFIGURED_MODE
        provisioning_class = DEFAULT_PROVISIONING_CLASS if mode.uses_provisioning_request else None
    as_they_are = {
        argument.spec_field: values[argument.name] for argument in argument_record.ARGUMENTS if argument.spec_field
    }
    try:
        return GangSpec(
            **{**as_they_are, "mode": mode or values["reservation"], "provisioning_class": provisioning_class},
            name=name,
            pod_template=build_member_template(
                image=values["image"],
                command=values["command"],
                args=values["args"],
                env=values["env"],
                pod_template=values["pod_template"],
                pod_template_file=values["pod_template_file"],
                gpus=values["gpus"],
                gpu_resource=values["gpu_resource"],
            ),
            resources=MemberResources(
                gpus=values["gpus"], cpu=values["cpu"], memory=values["memory"], gpu_resource=values["gpu_resource"]
            ),
            checkpoint=None if values["checkpoint"] is None else checkpoints.from_argument(values["checkpoint"]),
            cloud=cloud,
        )
    except GangSpecError as error:
        raise refusal(operator, argument_of_field(error.field), mode, error.message) from error
