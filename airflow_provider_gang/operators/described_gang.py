"""The gang a ``GangTrainingOperator``'s arguments describe, as ``reservation.spec.GangSpec``.

Built at parse time with stand-ins for values that still hold Jinja (so every other argument is
checked when the DAG is parsed), and per try after Airflow rendered the templated fields. Every
``GangSpecError`` becomes a ``GangArgumentError`` naming the operator argument a user wrote
(``kueue_queue``, not the spec's ``queue``). A ``reservation="auto"`` gang is checked in both modes
a try may choose (``reservation.tries.auto_mode``) and planned as ``gates``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from airflow_provider_gang.operators.settings import DEFAULT_PROVISIONING_CLASS, cloud_profile
from airflow_provider_gang.reservation import checkpoint as checkpoints
from airflow_provider_gang.reservation.checkpoint import PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.spec import GangSpec, GangSpecError, MemberResources, ReservationMode
from airflow_provider_gang.reservation.tries import auto_mode
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError, has_jinja
from airflow_provider_gang.reservation.tries.member_template import build_member_template


class GangArguments(Protocol):
    """What of a ``GangTrainingOperator`` describes its gang (the operator's attributes, as given)."""

    template_fields: Sequence[str]
    size: int
    min_size: int | None
    image: str | None
    pod_template: Mapping[str, Any] | None
    pod_template_file: str | None
    gpus: int
    cpu: str | None
    memory: str | None
    gpu_resource: str
    distributed: str | None
    master_port: int
    reservation: str
    provisioning_class: str | None
    provisioning_parameters: dict[str, str]
    strict_zone: bool
    spot: bool
    use_reservation: str | None
    cloud: str | CloudProfile | None
    checkpoint: str | PersistentVolumeCheckpoint | None
    retry_on_exit_codes: Any
    fail_on_exit_codes: Any
    kubernetes_conn_id: str


ARGUMENT_OF_FIELD = {"mode": "reservation", "queue": "kueue_queue", "reservation_name": "use_reservation"}
"""GangSpec field -> the operator argument a user wrote."""


def templated_values(operator: GangArguments, *, stand_ins: bool) -> dict[str, Any]:
    """The templated fields' values; with ``stand_ins``, a valid neutral value replaces any that
    still holds Jinja, so every other argument can be checked at parse time."""
    values = {name: getattr(operator, name) for name in operator.template_fields}
    if not stand_ins:
        return values
    neutral: dict[str, Any] = {
        "namespace": "default",
        "image": "image",
        "command": None,
        "args": None,
        "env": None,
        "kueue_queue": "queue",
        "zone": "zone",
        "labels": {},
        "pod_template_file": None,
        "checkpoint": None,
    }
    for name, value in values.items():
        if has_jinja(value):
            values[name] = neutral[name]
    values["checkpoint"] = checkpoints.stand_in(operator.checkpoint)
    if (
        values["pod_template_file"] is None
        and operator.pod_template_file is not None
        and operator.image is None
        and operator.pod_template is None
    ):
        values["image"] = "image"  # a templated file path: its content is checked after rendering
    return values


def candidate_specs(
    operator: GangArguments, name: str, *, stand_ins: bool = False, cloud: CloudProfile | None = None
) -> tuple[GangSpec, ...]:
    """The gang in every mode a try may run in (``auto``: ``gates``, then ``workload``; else the
    one mode), each checked; the first is the one a try is planned with."""
    modes = auto_mode.CANDIDATE_MODES if operator.reservation == auto_mode.AUTO else (None,)
    return tuple(build_spec(operator, name, stand_ins=stand_ins, cloud=cloud, mode=mode) for mode in modes)


def refusal(operator: GangArguments, argument: str, mode: ReservationMode | None, message: str) -> GangArgumentError:
    """The error for ``argument`` of the gang in ``mode``, saying so when only ``auto``'s choice of
    that mode refuses it."""
    if operator.reservation == auto_mode.AUTO and mode not in (None, auto_mode.CONFIGURED_MODE):
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
    values = templated_values(operator, stand_ins=stand_ins)
    cloud = cloud or cloud_profile(operator.cloud or "gke", operator.kubernetes_conn_id)
    provisioning_class = operator.provisioning_class
    if operator.reservation == auto_mode.AUTO:
        mode = mode or auto_mode.CONFIGURED_MODE
        provisioning_class = DEFAULT_PROVISIONING_CLASS if mode.uses_provisioning_request else None
    try:
        return GangSpec(
            name=name,
            namespace=values["namespace"],
            size=operator.size,
            min_size=operator.min_size,
            pod_template=build_member_template(
                image=values["image"],
                command=values["command"],
                args=values["args"],
                env=values["env"],
                pod_template=operator.pod_template,
                pod_template_file=values["pod_template_file"],
                gpus=operator.gpus,
                gpu_resource=operator.gpu_resource,
            ),
            resources=MemberResources(
                gpus=operator.gpus, cpu=operator.cpu, memory=operator.memory, gpu_resource=operator.gpu_resource
            ),
            mode=mode or operator.reservation,  # type: ignore[arg-type]  # GangSpec converts the string
            provisioning_class=provisioning_class,
            provisioning_parameters=operator.provisioning_parameters,
            queue=values["kueue_queue"],
            zone=values["zone"],
            strict_zone=operator.strict_zone,
            spot=operator.spot,
            labels=values["labels"],
            distributed=operator.distributed,  # type: ignore[arg-type]  # GangSpec converts the string
            master_port=operator.master_port,
            checkpoint=None if values["checkpoint"] is None else checkpoints.from_argument(values["checkpoint"]),
            reservation_name=operator.use_reservation,
            retry_on_exit_codes=operator.retry_on_exit_codes,  # type: ignore[arg-type]  # GangSpec checks them
            fail_on_exit_codes=operator.fail_on_exit_codes,  # type: ignore[arg-type]
            cloud=cloud,
        )
    except GangSpecError as error:
        argument = ARGUMENT_OF_FIELD.get(error.field, error.field)
        raise refusal(operator, argument, mode, error.message) from error
