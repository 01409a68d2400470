"""Checks of the ``GangTrainingOperator`` arguments that have no ``GangSpec`` counterpart.

``reservation.spec.GangSpec`` validates what describes the gang itself (sizes, resources, names, mode,
class, parameters). This module validates what only the operator has: time limits, ``start_by``, the
fallback ladder's fit to the mode, ``on_finish``, ``log_ranks``, ``deferrable``, ``distributed`` (and
``"jax"`` refused with Kueue partial admission, ``min_size < size``), the source of the pod
(``image`` / ``pod_template`` / ``pod_template_file``), ``command``/``args``/``env`` shapes, the
client options and the connection id. ``reservation.template`` checks the pod template's content.

Each check is a :data:`Check` that the argument record (``reservation.tries.argument_record``) attaches
to the argument its error names, and runs in the record's order. The checks run twice: in
``__init__`` at DAG parse time, skipping values that still hold Jinja, and again after
``render_template_fields`` with every value final. Each failure is a ``GangArgumentError`` naming the
argument, what is wrong and how to fix it; nothing has been created in the cluster when it is raised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow_provider_gang.reservation import deployment, fallback, multikueue
from airflow_provider_gang.reservation.fallback import FallbackStep
from airflow_provider_gang.reservation.manifests import rank_env
from airflow_provider_gang.reservation.manifests.rank_env import PROVIDER_VARIABLES

RESERVATION_MODES = ("provisioning_request", "kueue", "gates", "workload", "auto")
"""``auto``: ``workload`` where the cluster serves it, else ``gates`` (``reservation.tries.auto_mode``)."""
DISTRIBUTED_FRAMEWORKS = ("torch", "jax")
ON_FINISH_CHOICES = ("delete", "keep")

# POSIX portable environment variable names; Kubernetes accepts more (C_IDENTIFIER plus '-' and '.'),
# but names outside this set cannot be read by a shell in the container.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")

RANK_ENVIRONMENT: dict[str, tuple[str, ...]] = {
    framework.value: names for framework, names in rank_env.FRAMEWORK_VARIABLES.items()
}
"""``distributed`` value -> the variables the provider writes into every member for it
(``reservation.manifests.rank_env``); a user value would silently be overwritten, so it is refused."""


class GangArgumentError(ValueError):
    """An operator argument is invalid. ``argument`` names it; ``fix`` says what to write instead."""

    def __init__(self, argument: str, problem: str, fix: str = "") -> None:
        suffix = f". Fix: {fix}" if fix else ""
        super().__init__(f"GangTrainingOperator argument {argument!r}: {problem}{suffix}")
        self.argument = argument
        self.problem = problem
        self.fix = fix


class GangConfigurationError(GangArgumentError):
    """A ``[gang]`` option of Airflow's configuration that a try reads is malformed
    (``reservation.deployment.ConfigurationError``); ``argument`` is ``"[gang] <option>"``."""

    def __init__(self, error: deployment.ConfigurationError) -> None:
        ValueError.__init__(self, str(error))
        self.argument = f"[{deployment.SECTION}] {error.option}"
        self.problem = str(error)
        self.fix = ""


def has_jinja(value: Any) -> bool:
    """Whether ``value`` (or any string inside it) still holds a Jinja expression or statement."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(has_jinja(key) or has_jinja(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_jinja(item) for item in value)
    return False


class OperatorArguments(Mapping[str, Any]):
    """Every operator argument's value by name, as given (parse time) or rendered (execution time),
    read as attributes (``arguments.size``) by the checks below. Built with the record's defaults for
    what was not given: ``reservation.tries.argument_record.arguments_of``."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


Check = Callable[[OperatorArguments, bool], None]
"""A parse-time check: ``check(arguments, rendered)`` raises ``GangArgumentError`` naming the argument.
With ``rendered=False`` (parse time) a value that still holds Jinja is not judged."""


def as_duration(value: Any) -> Any:
    """``value`` as a ``timedelta`` when it is one or a number of seconds (as Airflow's own
    ``retry_delay`` and sensor ``timeout`` accept); anything else unchanged, for the check to name."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return value


def as_exit_codes(value: Any) -> Any:
    """An iterable of exit codes as a tuple (a generator is read once, here); anything else
    unchanged, for ``GangSpec`` to name (``reservation.exit_codes.as_code_set``)."""
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return tuple(value)
    return value


def check_fallbacks_shape(fallbacks: Any) -> tuple[Any, ...]:
    """``fallbacks`` as a tuple, or a ``GangArgumentError`` for a lone step, a string, a mapping, or
    an item that is a zone name instead of a step."""
    if isinstance(fallbacks, FallbackStep):
        raise GangArgumentError(
            "fallbacks",
            f"is a single step ({fallbacks.describe()}), not a list of steps",
            f"wrap it in a list: fallbacks=[{fallbacks!r}]",
        )
    if isinstance(fallbacks, (str, bytes, Mapping)) or not isinstance(fallbacks, (list, tuple)):
        raise GangArgumentError(
            "fallbacks",
            f"must be a list of reservation.fallback steps, got {fallbacks!r}",
            "pass e.g. fallbacks=[OtherZone('us-central1-b'), ShrinkTo(4)]",
        )
    for index, step in enumerate(fallbacks, start=1):
        if isinstance(step, str):
            raise GangArgumentError(
                "fallbacks",
                f"step {index} is the string {step!r}, not a step",
                f"write a step, e.g. OtherZone({step!r}) or OtherQueue({step!r})",
            )
        if not isinstance(step, FallbackStep):
            raise GangArgumentError(
                "fallbacks",
                f"step {index} is {step!r}, not a reservation.fallback step",
                "pass e.g. fallbacks=[OtherZone('us-central1-b'), ShrinkTo(4)]",
            )
    return tuple(fallbacks)


def duration_check(argument: str, *, optional: bool, example: str) -> Check:
    """The check of a time limit: a positive ``timedelta`` (numbers were converted by
    :func:`as_duration`), or ``None`` when ``optional``."""

    def check(arguments: OperatorArguments, rendered: bool) -> None:
        value = arguments[argument]
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, timedelta):
            raise GangArgumentError(
                argument, f"must be a datetime.timedelta or a number of seconds, got {value!r}", f"use {example}"
            )
        if value <= timedelta(0):
            raise GangArgumentError(argument, f"must be positive, got {value}", f"use {example}")

    return check


def string_list_check(argument: str, example: str) -> Check:
    """The check of ``command`` / ``args``: a list of strings (a single string is refused: Kubernetes
    would not split it into words)."""

    def check(arguments: OperatorArguments, rendered: bool) -> None:
        value = arguments[argument]
        if value is None or (not rendered and has_jinja(value)):
            return
        if isinstance(value, str):
            raise GangArgumentError(
                argument, "is a single string; Kubernetes would not split it into words", f"pass a list, e.g. {example}"
            )
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            raise GangArgumentError(argument, f"must be a list of strings, got {value!r}", f"pass e.g. {example}")

    return check


def check_env(arguments: OperatorArguments, rendered: bool) -> None:
    """``env``: a mapping of valid names to strings, none of them a variable the provider sets."""
    env, distributed = arguments.env, arguments.distributed
    if env is None or (not rendered and isinstance(env, str) and has_jinja(env)):
        return
    if not isinstance(env, Mapping):
        raise GangArgumentError(
            "env", f"must be a mapping of names to strings, got {type(env).__name__}", "pass e.g. {'EPOCHS': '3'}"
        )
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise GangArgumentError(
                "env",
                f"{name!r} is not a valid environment variable name",
                "use letters, digits and '_' and start with a letter or '_'",
            )
        if not isinstance(value, str) and not (not rendered and has_jinja(value)):
            raise GangArgumentError(
                "env", f"value of {name} must be a string, got {value!r}", f"quote it, e.g. {name}={str(value)!r}"
            )
        if name in PROVIDER_VARIABLES:
            raise GangArgumentError(
                "env",
                f"{name} is set by the provider in every member that needs it",
                f"remove {name} from env (or rename your variable); the provider gives each member its own value",
            )
        if isinstance(distributed, str) and name in RANK_ENVIRONMENT.get(distributed, ()):
            raise GangArgumentError(
                "env",
                f"{name} is set by the operator for distributed={distributed!r}",
                f"remove {name} from env; every member gets its own value",
            )


def check_pod_source(arguments: OperatorArguments, rendered: bool) -> None:
    """Exactly one of image / pod_template / pod_template_file; GangSpec checks the template itself."""
    sources = [name for name in ("image", "pod_template", "pod_template_file") if arguments[name] not in (None, "")]
    if not sources:
        raise GangArgumentError(
            "image",
            "no pod to run: none of image, pod_template, pod_template_file is given",
            "pass image='repo/trainer:tag' or a pod_template",
        )
    if len(sources) > 1:
        raise GangArgumentError(
            sources[1],
            f"conflicts with {sources[0]}; exactly one defines the member pod",
            f"keep only one of {', '.join(sources)}",
        )
    if arguments.image is not None and not isinstance(arguments.image, str):
        raise GangArgumentError("image", f"must be a string, got {arguments.image!r}", "pass image='repo/trainer:tag'")
    path = arguments.pod_template_file
    if path is not None and not isinstance(path, (str, Path)):
        raise GangArgumentError("pod_template_file", f"must be a path, got {path!r}", "pass a YAML file path")


def check_distributed(arguments: OperatorArguments, rendered: bool) -> None:
    if arguments.distributed not in (None, *DISTRIBUTED_FRAMEWORKS):
        raise GangArgumentError(
            "distributed", f"unknown framework {arguments.distributed!r}", "use 'torch', 'jax' or None"
        )


def check_mode(arguments: OperatorArguments, rendered: bool) -> None:
    """Mode checks GangSpec cannot make: it never sees a class in kueue mode, nor the ladder.
    ``provisioning_class`` is the one the user gave (the operator fills in the default later)."""
    mode = arguments.reservation
    if mode not in RESERVATION_MODES:
        raise GangArgumentError("reservation", f"unknown mode {mode!r}", f"use one of {', '.join(RESERVATION_MODES)}")
    if mode == "kueue" and arguments.provisioning_class:
        raise GangArgumentError(
            "provisioning_class",
            "does not apply to reservation='kueue'",
            "remove it; Kueue takes the class from its ProvisioningRequestConfig",
        )
    if mode == "workload" and arguments.provisioning_class:
        raise GangArgumentError(
            "provisioning_class",
            "does not apply to reservation='workload'",
            "remove it; the kube-scheduler places the gang's PodGroup on the nodes there are",
        )
    if mode == "auto" and arguments.provisioning_class:
        raise GangArgumentError(
            "provisioning_class",
            "does not apply to reservation='auto': it may choose 'workload', which creates no ProvisioningRequest",
            "remove it, or use reservation='gates' to choose the class",
        )
    for description, required_mode in fallback.required_modes(arguments.fallbacks):
        if required_mode and required_mode != mode:
            raise GangArgumentError(
                "fallbacks",
                f"step {description} needs reservation={required_mode!r}, not {mode!r}",
                "remove the step or change the reservation mode",
            )


def check_jax_partial_admission(arguments: OperatorArguments, rendered: bool) -> None:
    """JAX cannot run under Kueue partial admission: ``jax.distributed.initialize`` takes a fixed
    ``num_processes`` and has no elastic rendezvous, and a JAX program's device mesh and sharding
    are usually written for one process count, so a gang that may start with fewer members than
    ``size`` is refused (torch members read the admitted size, ``reservation.manifests.world``)."""
    size, min_size = arguments.size, arguments.min_size
    numbers = all(isinstance(value, int) and not isinstance(value, bool) for value in (size, min_size))
    if arguments.distributed != "jax" or arguments.reservation != "kueue" or not numbers or min_size >= size:
        return
    raise GangArgumentError(
        "min_size",
        f"min_size={min_size} < size={size} lets Kueue admit fewer members than size, and "
        "distributed='jax' needs a fixed process count (jax.distributed.initialize has no elastic rendezvous)",
        f"set min_size={size} (or leave it unset) for distributed='jax', or use distributed='torch', whose "
        "members are told the admitted size",
    )


def check_on_finish(arguments: OperatorArguments, rendered: bool) -> None:
    if arguments.on_finish not in ON_FINISH_CHOICES:
        raise GangArgumentError(
            "on_finish",
            f"must be 'delete' or 'keep', got {arguments.on_finish!r}",
            "use on_finish='delete' (default) or 'keep' to inspect pods afterwards",
        )


def check_log_ranks(arguments: OperatorArguments, rendered: bool) -> None:
    log_ranks, size = arguments.log_ranks, arguments.size
    if log_ranks == "all":
        return
    if isinstance(log_ranks, (str, bytes)) or not isinstance(log_ranks, (list, tuple, set, frozenset)):
        raise GangArgumentError(
            "log_ranks",
            f"must be a list of ranks or 'all', got {log_ranks!r}",
            "pass e.g. log_ranks=[0] or log_ranks='all'",
        )
    for rank in log_ranks:
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise GangArgumentError(
                "log_ranks",
                f"{rank!r} is not a rank (ranks are integers from 0)",
                "list ranks as integers, e.g. [0, 1]",
            )
        if isinstance(size, int) and not isinstance(size, bool) and size >= 1 and rank >= size:
            raise GangArgumentError(
                "log_ranks", f"rank {rank} does not exist in a gang of size {size}", f"use ranks 0..{size - 1}"
            )


def check_deferrable(arguments: OperatorArguments, rendered: bool) -> None:
    if arguments.deferrable not in (True, False):
        raise GangArgumentError(
            "deferrable",
            f"must be True or False, got {arguments.deferrable!r}",
            "pass a bool; the default comes from [operators] default_deferrable",
        )


def check_connection_id(arguments: OperatorArguments, rendered: bool) -> None:
    conn_id = arguments.kubernetes_conn_id
    if not isinstance(conn_id, str) or not conn_id.strip():
        raise GangArgumentError(
            "kubernetes_conn_id",
            f"must be a non-empty connection id, got {conn_id!r}",
            "use 'kubernetes_default' or the id of your Kubernetes connection",
        )


def check_client_options(arguments: OperatorArguments, rendered: bool) -> None:
    """``client_options``: ``None`` or a mapping of known client options (``reservation.deployment``)
    to numbers."""
    options = arguments.client_options
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise GangArgumentError(
            "client_options", f"must be a mapping, got {options!r}", "pass e.g. {'request_timeout': 60}"
        )
    problem = deployment.client_option_problem(options)
    if problem is not None:
        keys = ", ".join(deployment.CLIENT_DEFAULTS)
        raise GangArgumentError("client_options", problem, f"use the keys {keys}, each a number")


def check_multikueue_connections(arguments: OperatorArguments, rendered: bool) -> None:
    """``multikueue_connections``: ``{MultiKueueCluster name: connection id}``, where Kueue queues the gang."""
    value, example = arguments.multikueue_connections, "multikueue_connections={'worker-1': 'kube_worker1'}"
    if value is not None and not isinstance(value, Mapping):
        raise GangArgumentError("multikueue_connections", f"must map cluster names to connections: {value!r}", example)
    try:
        multikueue.parse_connections(value)
    except multikueue.ConnectionsError as error:
        raise GangArgumentError("multikueue_connections", str(error), example) from error
    if value is not None and arguments.reservation != "kueue":
        raise GangArgumentError(
            "multikueue_connections",
            f"applies to reservation='kueue' only (a Kueue MultiKueue manager's queue), not {arguments.reservation!r}",
            "remove it, or use reservation='kueue' with the manager's LocalQueue",
        )
