"""``GangTrainingOperator``: reserve capacity for N pods, launch them together, watch them as one gang.

The arguments are checked twice: in ``__init__`` at DAG parse time, where a
value that still holds Jinja is skipped, and at the start of ``execute`` after Airflow has rendered
``template_fields``. Operator-only checks live in :mod:`.arguments`; everything that describes the gang
itself is checked by building a ``reservation.spec.GangSpec`` (:mod:`.described_gang`; with a
stand-in name at parse time, the real per-try name at run time).

How a try runs is :mod:`.execution`; this module holds the arguments and Airflow's entry points.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

from airflow.sdk import BaseOperator, Context

from airflow_provider_gang.airflow_compat import conf
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.links import GangReservationLink
from airflow_provider_gang.operators import described_gang, execution
from airflow_provider_gang.operators.argument_warnings import parse_time_warnings
from airflow_provider_gang.operators.settings import (
    DEFAULT_PROVISIONING_CLASS,
    TrySettings,
    cloud_profile,
    multikueue_connections,
)
from airflow_provider_gang.operators.waiting import DeferringWaiter, InlineWaiter
from airflow_provider_gang.reservation import fallback, naming
from airflow_provider_gang.reservation.checkpoint import PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.observed import Stage
from airflow_provider_gang.reservation.spec import (
    DEFAULT_MASTER_PORT,
    GangSpec,
    GangSpecError,
    ReservationMode,
)
from airflow_provider_gang.reservation.tries import arguments as checks
from airflow_provider_gang.reservation.tries import auto_mode, plan

PARSE_TIME_NAME = naming.gang_name("parse-check", "task", "run")
"""Stand-in object name used to validate a GangSpec before dag/run/try are known."""


class GangTrainingOperator(BaseOperator):
    """Run ``size`` pods as one gang: all start together or none does.

    What to run: ``image`` (+ ``command``, ``args``, ``env``) or ``pod_template`` / ``pod_template_file``;
    ``size`` members (``min_size`` is the floor for partial admission and shrinking), each with ``gpus``,
    ``cpu``, ``memory``. ``distributed="torch"|"jax"`` gives members their rank environment and a
    headless Service for rendezvous on ``master_port``.

    How to reserve: ``reservation="provisioning_request"|"kueue"|"gates"|"workload"|"auto"`` (``auto``:
    ``workload`` on a cluster that serves it, else ``gates``, chosen per try) with
    ``provisioning_class`` (default best-effort atomic scale-up), ``provisioning_parameters``,
    ``kueue_queue`` (the Kueue LocalQueue; not ``queue``, which ``BaseOperator`` already uses for the
    executor queue), ``zone`` / ``strict_zone``, ``spot``, and ``use_reservation``: the name of a
    GKE specific reservation the members must consume (the first rung; the ladder's
    ``LeaveReservation()`` falls back to ordinary on-demand or spot capacity). ``cloud``: ``"gke"``,
    ``"eks"``, ``"karpenter"``, ``"aks"`` or a ``reservation.cloud.CloudProfile`` (spot, on-demand,
    reservation and reclaimed-node labels and taints); unset: the connection's extra ``cloud``, else GKE.

    Time limits (each a ``timedelta`` or seconds): ``reservation_timeout`` per try (default 30
    minutes), ``startup_timeout`` for all members to run once launched (default 10 minutes),
    ``run_timeout`` (default none), ``unreachable_timeout`` (default 10 minutes: how long any wait
    tolerates an API server that does not answer before the try fails with
    ``cluster_unreachable``), and
    ``start_by``: how long after the run's data interval end the gang may still start, across all
    tries; past it the task fails without retrying.

    ``fallbacks``: the ladder of ``reservation.fallback`` steps later tries walk down; which step a
    try uses follows from its try number and why earlier tries failed. Set ``retries`` to at least
    the ladder's length to use all of it.

    ``fail_on_exit_codes`` / ``retry_on_exit_codes``: exit codes (1..255) that say a member failed
    for good (no retry) or for a cause a new try may escape (``member_exit_retryable``, answered
    by ``RetryAsIs``); any other non-zero code stays ``member_failed`` (``reservation.exit_codes``).

    ``checkpoint``: where every try of one DAG run saves - a URI or absolute path (templated, e.g.
    ``"gs://bucket/{{ dag.dag_id }}/{{ run_id }}"``) or ``reservation.checkpoint.PersistentVolumeCheckpoint``
    (a claim mounted into every member). Members then get ``GANG_CHECKPOINT_DIR``, ``GANG_TRY_NUMBER``,
    ``GANG_TERMINATION_MESSAGE_PATH`` and, when an earlier try reported a checkpoint through its
    termination message, ``GANG_RESUME=1`` and ``GANG_RESUME_STEP`` (``reservation.checkpoint``).

    ``on_finish="delete"`` removes every object of the gang when the task ends (``"keep"`` leaves
    finished pods for inspection); ``log_ranks`` (default ``[0]``, or ``"all"``) are the members
    whose logs go into the task log. ``deferrable`` defaults to ``[operators] default_deferrable``;
    the blocking mode runs the same triggers in the worker. ``client_options``
    (``kube.options.ClientOptions``: ``request_timeout``, ``retry_attempts``, ``retry_base_delay``,
    ``retry_max_delay``, ``qps``, ``burst``, ``max_parallel_requests``) sets how patient and how fast
    every API call of a try is, in the worker and the triggerer.

    ``multikueue_connections``: for a ``kueue_queue`` on a Kueue MultiKueue manager, the Airflow
    ``kubernetes`` connection of each worker cluster, by MultiKueueCluster name
    (``{"worker-1": "kube_worker1"}``); the gang is followed on the worker that admitted it through
    its connection (members, rank logs, exit codes, teardown there). Unset: the provider's
    ``[gang] multikueue_connections`` option. A worker without a connection still runs the gang,
    followed through the manager's mirrored Job status only (``reservation.multikueue``).
    """

    template_fields: Sequence[str] = (
        "namespace",
        "image",
        "command",
        "args",
        "env",
        "kueue_queue",
        "zone",
        "labels",
        "pod_template_file",
        "checkpoint",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"env": "json", "args": "py", "command": "py"}
    operator_extra_links = (GangReservationLink(),)
    ui_color = "#d9ecff"

    def __init__(
        self,
        *,
        size: int,
        image: str | None = None,
        command: Sequence[str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        pod_template: Mapping[str, Any] | None = None,
        pod_template_file: str | None = None,
        min_size: int | None = None,
        gpus: int = 0,
        cpu: str | None = None,
        memory: str | None = None,
        gpu_resource: str = "nvidia.com/gpu",
        distributed: str | None = None,
        master_port: int = DEFAULT_MASTER_PORT,
        reservation: str = "provisioning_request",
        provisioning_class: str | None = None,
        provisioning_parameters: Mapping[str, str] | None = None,
        kueue_queue: str | None = None,
        zone: str | None = None,
        strict_zone: bool = False,
        spot: bool = False,
        use_reservation: str | None = None,
        cloud: str | CloudProfile | None = None,
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
        reservation_timeout: timedelta | float = timedelta(minutes=30),
        startup_timeout: timedelta | float = timedelta(minutes=10),
        run_timeout: timedelta | float | None = None,
        start_by: timedelta | float | None = None,
        unreachable_timeout: timedelta | float = timedelta(minutes=10),
        fallbacks: Sequence[fallback.FallbackStep] = (),
        checkpoint: str | PersistentVolumeCheckpoint | None = None,
        retry_on_exit_codes: Iterable[int] = (),
        fail_on_exit_codes: Iterable[int] = (),
        on_finish: str = "delete",
        log_ranks: Sequence[int] | str = (0,),
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        kubernetes_conn_id: str = "kubernetes_default",
        client_options: Mapping[str, float] | None = None,
        multikueue_connections: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.size, self.min_size = size, min_size
        self.image, self.command, self.args, self.env = image, command, args, env
        self.pod_template, self.pod_template_file = pod_template, pod_template_file
        self.gpus, self.cpu, self.memory, self.gpu_resource = gpus, cpu, memory, gpu_resource
        self.distributed, self.master_port = distributed, master_port
        self.reservation = reservation
        self.provisioning_class = provisioning_class
        if provisioning_class is None and reservation in ("provisioning_request", "gates"):
            self.provisioning_class = DEFAULT_PROVISIONING_CLASS
        self.provisioning_parameters = dict(provisioning_parameters or {})
        self.kueue_queue, self.zone, self.strict_zone, self.spot = kueue_queue, zone, strict_zone, spot
        self.use_reservation, self.cloud = use_reservation, cloud
        self.namespace = namespace
        self.labels = dict(labels or {})
        self.reservation_timeout = checks.as_duration(reservation_timeout)
        self.startup_timeout = checks.as_duration(startup_timeout)
        self.run_timeout, self.start_by = checks.as_duration(run_timeout), checks.as_duration(start_by)
        self.unreachable_timeout = checks.as_duration(unreachable_timeout)
        self.fallbacks = checks.check_fallbacks_shape(fallbacks)
        self.checkpoint = checkpoint
        self.retry_on_exit_codes = checks.as_exit_codes(retry_on_exit_codes)
        self.fail_on_exit_codes = checks.as_exit_codes(fail_on_exit_codes)
        self.on_finish, self.log_ranks = on_finish, log_ranks
        self.deferrable = deferrable
        self.kubernetes_conn_id = kubernetes_conn_id
        self.client_options = dict(client_options or {})
        self.multikueue_connections = multikueue_connections
        self._active_waiter: DeferringWaiter | InlineWaiter | None = None
        self.check_arguments(rendered=False)
        for warning in self.argument_warnings():
            self.log.warning("GangTrainingOperator %s: %s", self.task_id, warning)

    # -- validation ---------------------------------------------------------------------------

    def check_arguments(self, *, rendered: bool) -> None:
        """Raise ``GangArgumentError`` naming the first invalid argument (see module docstring)."""
        checks.check_arguments(
            checks.OperatorArguments(
                size=self.size,
                min_size=self.min_size,
                image=self.image,
                command=self.command,
                args=self.args,
                env=self.env,
                pod_template=self.pod_template,
                pod_template_file=self.pod_template_file,
                distributed=self.distributed,
                reservation=self.reservation,
                provisioning_class=self.provisioning_class if self.reservation in ("kueue", "auto") else None,
                reservation_timeout=self.reservation_timeout,
                startup_timeout=self.startup_timeout,
                run_timeout=self.run_timeout,
                start_by=self.start_by,
                on_finish=self.on_finish,
                unreachable_timeout=self.unreachable_timeout,
                log_ranks=self.log_ranks,
                deferrable=self.deferrable,
                kubernetes_conn_id=self.kubernetes_conn_id,
                multikueue_connections=self.multikueue_connections,
                fallback_modes=fallback.required_modes(self.fallbacks),
            ),
            rendered=rendered,
        )
        try:
            ClientOptions.from_dict(self.client_options)
        except (TypeError, ValueError) as error:
            raise checks.GangArgumentError("client_options", f"{error}") from error
        for base in self.candidate_specs(PARSE_TIME_NAME, stand_ins=not rendered):
            try:
                fallback.check_ladder(self.fallbacks, base)
            except GangSpecError as error:
                raise described_gang.refusal(self, "fallbacks", base.mode, error.message) from error

    def argument_warnings(self) -> list[str]:
        """What is allowed but probably not meant, said once at parse time (:mod:`.argument_warnings`)."""
        return parse_time_warnings(
            fallbacks=self.fallbacks,
            base=self.build_spec(PARSE_TIME_NAME, stand_ins=True),
            retries=self.retries or 0,
            checkpoint=self.checkpoint,
            retry_on_exit_codes=self.retry_on_exit_codes,
            reservation=self.reservation,
            provisioning_class=self.provisioning_class,
            provisioning_parameters=self.provisioning_parameters,
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
        the gang as configured, or why a rendered argument is invalid."""
        configured: GangSpec | None = None
        argument_error: checks.GangArgumentError | None = None
        connections: dict[str, str] = {}
        try:
            self.check_arguments(rendered=True)
            cloud = cloud_profile(self.cloud, self.kubernetes_conn_id)
            configured = self.candidate_specs(PARSE_TIME_NAME, cloud=cloud)[0]
            connections = multikueue_connections(self.multikueue_connections)
        except checks.GangArgumentError as error:
            argument_error = error
        return TrySettings(
            kubernetes_conn_id=self.kubernetes_conn_id,
            namespace=str(self.namespace),
            mode=self.reservation,
            size=self.size,
            ladder=plan.effective_ladder(self.fallbacks, self.retries or 0),
            configured=configured,
            auto_reservation=self.reservation == auto_mode.AUTO,
            argument_error=argument_error,
            reservation_timeout=self.reservation_timeout,
            startup_timeout=self.startup_timeout,
            run_timeout=self.run_timeout,
            start_by=self.start_by,
            on_finish=self.on_finish,
            unreachable_timeout=self.unreachable_timeout,
            log_ranks=self.log_ranks,
            client_options=ClientOptions.from_dict(self.client_options),
            log=self.log,
            multikueue_connections=connections,
        )

    def _waiter(self) -> DeferringWaiter | InlineWaiter:
        """A new waiter for this entry point of the try; ``on_kill`` reaches it."""
        options = ClientOptions.from_dict(self.client_options)
        resume_methods = {Stage.RESERVATION: self.execute_reserved, Stage.RUN: self.execute_finished}
        waiter: DeferringWaiter | InlineWaiter = (
            DeferringWaiter(self.defer, resume_methods, self.log, options)
            if self.deferrable
            else InlineWaiter(self.log, options)
        )
        self._active_waiter = waiter
        return waiter

    def execute(self, context: Context) -> Any:
        """Start (or adopt after a worker crash) this try; see :mod:`.execution`."""
        return execution.start_try(self.try_settings(), self._waiter(), context)

    def execute_reserved(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed by ``ReservationTrigger``: launch the members, or fail the try with its reason."""
        return execution.on_reservation_event(self.try_settings(), self._waiter(), context, event)

    def execute_finished(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed by ``GangRunTrigger``: collect logs and costs, clean up, succeed or fail the try."""
        return execution.on_run_event(self.try_settings(), self._waiter(), context, event)

    def on_kill(self) -> None:
        """Record the try as killed and delete the gang the worker works on (a deferred task has no
        worker; its trigger's ``on_kill`` cleans up)."""
        if self._active_waiter is not None:
            self._active_waiter.kill()
