"""``GangTrainingOperator``: reserve capacity for N pods, launch them together, watch them as one gang.

The arguments are checked twice: in ``__init__`` at DAG parse time, where a
value that still holds Jinja is skipped, and at the start of ``execute`` after Airflow has rendered
``template_fields``. Each argument's check is its entry in the argument record
(``reservation.tries.argument_record``; the operator-only checks are ``reservation.tries.arguments``);
everything that describes the gang itself is checked by building a ``reservation.spec.GangSpec``
(:mod:`.described_gang`; with a stand-in name at parse time, the real per-try name at run time).

How a try runs is :mod:`.execution`; this module holds the arguments and Airflow's entry points.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import BaseOperator, Context

from airflow_provider_gang.airflow_compat import conf
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.links import GangReservationLink
from airflow_provider_gang.operators import configuration, described_gang, execution
from airflow_provider_gang.operators.argument_warnings import parse_time_warnings
from airflow_provider_gang.operators.settings import DEFAULT_PROVISIONING_CLASS, TrySettings, cloud_profile
from airflow_provider_gang.operators.waiting import DeferringWaiter, InlineWaiter
from airflow_provider_gang.reservation import fallback, naming
from airflow_provider_gang.reservation.checkpoint import PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.records.triggers import DEFAULT_HEARTBEAT_SECONDS, DEFAULT_WATCH_TIMEOUT_SECONDS
from airflow_provider_gang.reservation.spec import GangSpec, GangSpecError, ReservationMode
from airflow_provider_gang.reservation.tries import argument_record, auto_mode, plan
from airflow_provider_gang.reservation.tries import arguments as checks
from airflow_provider_gang.reservation.tries.argument_record import default
from airflow_provider_gang.reservation.tries.argument_table import parameter_fields
from airflow_provider_gang.reservation.tries.arguments import OperatorArguments

PARSE_TIME_NAME = naming.gang_name("parse-check", "task", "run")
"""Stand-in object name used to validate a GangSpec before dag/run/try are known."""


class GangTrainingOperator(BaseOperator):
    """Run ``size`` pods as one gang: all start together or none does.

    What to run: ``image`` (+ ``command``, ``args``, ``env``) or ``pod_template`` / ``pod_template_file``;
    ``size`` members (``min_size`` is the floor for partial admission and shrinking), each with ``gpus``,
    ``cpu``, ``memory``. ``distributed="torch"|"jax"`` gives members their rank environment and a
    headless Service for rendezvous on ``master_port``.

    How to reserve: ``reservation="provisioning_request"|"kueue"|"gates"|"workload"|"auto"`` with a
    class, a queue, a zone, spot or on-demand capacity, a reservation to consume, on a cloud; how long
    each stage may wait; the ``fallbacks`` ladder later tries walk down (set ``retries`` to at least
    its length), exit codes that end or retry the task, a ``checkpoint`` every try of a run shares;
    what is left when the task ends and whose logs it shows; whether the waits defer.

    Every argument, its type, default and check is one entry of
    ``reservation.tries.argument_record.ARGUMENTS``: the signature below takes its defaults from
    there, and the parameter list that follows is rendered from it.
    """

    template_fields: Sequence[str] = argument_record.templated_names()
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "env": "json",
        "args": "py",
        "command": "py",
        "pod_template": "json",
    }
    operator_extra_links = (GangReservationLink(),)
    ui_color = "#d9ecff"
    rank_zero_returns: ClassVar[bool] = False
    """Whether the task's return value is rank 0's (``@task.gang``) instead of the gang's summary."""

    def __init__(
        self,
        *,
        size: int,
        image: str | None = default("image"),
        command: Sequence[str] | None = default("command"),
        args: Sequence[str] | None = default("args"),
        env: Mapping[str, str] | None = default("env"),
        pod_template: Mapping[str, Any] | None = default("pod_template"),
        pod_template_file: str | None = default("pod_template_file"),
        min_size: int | None = default("min_size"),
        gpus: int = default("gpus"),
        cpu: str | None = default("cpu"),
        memory: str | None = default("memory"),
        gpu_resource: str = default("gpu_resource"),
        distributed: str | None = default("distributed"),
        master_port: int = default("master_port"),
        reservation: str = default("reservation"),
        provisioning_class: str | None = default("provisioning_class"),
        provisioning_parameters: Mapping[str, str] | None = default("provisioning_parameters"),
        kueue_queue: str | None = default("kueue_queue"),
        zone: str | None = default("zone"),
        strict_zone: bool = default("strict_zone"),
        required_topology: str | None = default("required_topology"),
        preferred_topology: str | None = default("preferred_topology"),
        spot: bool = default("spot"),
        use_reservation: str | None = default("use_reservation"),
        cloud: str | CloudProfile | None = default("cloud"),
        namespace: str = default("namespace"),
        labels: Mapping[str, str] | None = default("labels"),
        reservation_timeout: timedelta | float = default("reservation_timeout"),
        startup_timeout: timedelta | float = default("startup_timeout"),
        run_timeout: timedelta | float | None = default("run_timeout"),
        start_by: timedelta | float | None = default("start_by"),
        unreachable_timeout: timedelta | float = default("unreachable_timeout"),
        fallbacks: Sequence[fallback.FallbackStep] = default("fallbacks"),
        checkpoint: str | PersistentVolumeCheckpoint | None = default("checkpoint"),
        retry_on_exit_codes: Iterable[int] = default("retry_on_exit_codes"),
        fail_on_exit_codes: Iterable[int] = default("fail_on_exit_codes"),
        on_finish: str = default("on_finish"),
        log_ranks: Sequence[int] | str = default("log_ranks"),
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=default("deferrable")),
        kubernetes_conn_id: str = default("kubernetes_conn_id"),
        client_options: Mapping[str, float] | None = default("client_options"),
        multikueue_connections: Mapping[str, str] | None = default("multikueue_connections"),
        **kwargs: Any,
    ) -> None:
        """Store every argument as the record normalises it, then check them (parse time). Long for one
        reason: the signature names each argument of ``argument_record.ARGUMENTS`` once, with its type
        and default, so IDEs, mypy and Airflow's docs see them (``test_argument_record`` holds the
        signature to the record)."""
        # Every keyword above is an argument of the record: store each one as the record normalises it.
        given = {name: value for name, value in locals().items() if name in argument_record.BY_NAME}
        super().__init__(**kwargs)
        for name, value in given.items():
            setattr(self, name, argument_record.normalised(name, value))
        if provisioning_class is None and reservation in ("provisioning_request", "gates"):
            self.provisioning_class = DEFAULT_PROVISIONING_CLASS
        self._active_waiter: DeferringWaiter | InlineWaiter | None = None
        self.check_arguments(rendered=False)
        for warning in self.argument_warnings():
            self.log.warning("GangTrainingOperator %s: %s", self.task_id, warning)

    # -- validation ---------------------------------------------------------------------------

    def check_arguments(self, *, rendered: bool) -> None:
        """Raise ``GangArgumentError`` naming the first invalid argument (see module docstring)."""
        values = self.argument_values()
        argument_record.check_arguments(values, rendered=rendered)
        for base in self.candidate_specs(PARSE_TIME_NAME, stand_ins=not rendered):
            try:
                fallback.check_ladder(values.fallbacks, base)
            except GangSpecError as error:
                raise described_gang.refusal(self, "fallbacks", base.mode, error.message) from error

    def argument_values(self) -> OperatorArguments:
        """Every argument's current value (as given, or rendered), by name: the attributes ``__init__``
        stored, which Airflow renders in place."""
        return OperatorArguments({name: getattr(self, name) for name in argument_record.names()})

    def argument_warnings(self) -> list[str]:
        """What is allowed but probably not meant, said once at parse time (:mod:`.argument_warnings`)."""
        values = self.argument_values()
        return parse_time_warnings(
            fallbacks=values.fallbacks,
            base=self.build_spec(PARSE_TIME_NAME, stand_ins=True),
            retries=self.retries or 0,
            checkpoint=values.checkpoint,
            retry_on_exit_codes=values.retry_on_exit_codes,
            reservation=values.reservation,
            provisioning_class=values.provisioning_class,
            provisioning_parameters=values.provisioning_parameters,
        )

    def candidate_specs(
        self, name: str, *, stand_ins: bool = False, cloud: CloudProfile | None = None
    ) -> tuple[GangSpec, ...]:
        """The gang in every mode a try may run in (:func:`.described_gang.candidate_specs`)."""
        return described_gang.candidate_specs(self, name, stand_ins=stand_ins, cloud=cloud)

    def build_spec(
        self,
        name: str,
        *,
        stand_ins: bool = False,
        cloud: CloudProfile | None = None,
        mode: ReservationMode | None = None,
    ) -> GangSpec:
        """The gang as the arguments describe it, named ``name`` (:func:`.described_gang.build_spec`)."""
        return described_gang.build_spec(self, name, stand_ins=stand_ins, cloud=cloud, mode=mode)

    @classmethod
    def get_serialized_fields(cls) -> frozenset[str]:
        """Airflow's serialized fields plus ``kubernetes_conn_id``: the scheduler and the api-server
        see only the serialized task, and the listener that withdraws a task's gangs when the
        scheduler fails it reaches the cluster through it (``airflow_provider_gang.sweep``)."""
        parent: Any = super()
        return frozenset(parent.get_serialized_fields() | {"kubernetes_conn_id"})

    # -- Airflow entry points -----------------------------------------------------------------

    def try_settings(self) -> TrySettings:
        """The rendered arguments a try runs with, as values (a try never reads the operator again):
        the gang as configured, or why a rendered argument (or a ``[gang]`` option) is invalid."""
        values = self.argument_values()
        configured: GangSpec | None = None
        argument_error: checks.GangArgumentError | None = None
        options = ClientOptions()
        heartbeat, watch_timeout = DEFAULT_HEARTBEAT_SECONDS, DEFAULT_WATCH_TIMEOUT_SECONDS
        workers: dict[str, str] = {}
        try:
            self.check_arguments(rendered=True)
            options = configuration.client_options(values.client_options)
            workers = configuration.multikueue_connections(values.multikueue_connections)
            heartbeat, watch_timeout = configuration.heartbeat_seconds(), configuration.watch_timeout_seconds()
            cloud = cloud_profile(values.cloud, values.kubernetes_conn_id)
            configured = self.candidate_specs(PARSE_TIME_NAME, cloud=cloud)[0]
        except checks.GangArgumentError as error:
            argument_error = error
        return TrySettings(
            **argument_record.try_settings(values),
            ladder=plan.effective_ladder(values.fallbacks, self.retries or 0),
            configured=configured,
            auto_reservation=values.reservation == auto_mode.AUTO,
            argument_error=argument_error,
            client_options=options,
            heartbeat_seconds=heartbeat,
            watch_timeout_seconds=watch_timeout,
            log=self.log,
            rank_zero_returns=self.rank_zero_returns,
            multikueue_connections=workers,
        )

    def _waiter(self, options: ClientOptions) -> DeferringWaiter | InlineWaiter:
        """A new waiter for this entry point of the try; ``on_kill`` reaches it."""
        resume_methods = {Stage.RESERVATION: self.execute_reserved, Stage.RUN: self.execute_finished}
        waiter: DeferringWaiter | InlineWaiter = (
            DeferringWaiter(self.defer, resume_methods, self.log, options)
            if self.argument_values().deferrable
            else InlineWaiter(self.log, options)
        )
        self._active_waiter = waiter
        return waiter

    def execute(self, context: Context) -> Any:
        """Start (or adopt after a worker crash) this try; see :mod:`.execution`."""
        settings = self.try_settings()
        return execution.start_try(settings, self._waiter(settings.client_options), context)

    def execute_reserved(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed by ``ReservationTrigger``: launch the members, or fail the try with its reason."""
        settings = self.try_settings()
        return execution.on_reservation_event(settings, self._waiter(settings.client_options), context, event)

    def execute_finished(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed by ``GangRunTrigger``: collect logs and costs, clean up, succeed or fail the try."""
        settings = self.try_settings()
        return execution.on_run_event(settings, self._waiter(settings.client_options), context, event)

    def on_kill(self) -> None:
        """Record the try as killed and delete the gang the worker works on (a deferred task has no
        worker; its trigger's ``on_kill`` cleans up)."""
        if self._active_waiter is not None:
            self._active_waiter.kill()


GangTrainingOperator.__doc__ = inspect.cleandoc(GangTrainingOperator.__doc__ or "") + "\n" + parameter_fields()
