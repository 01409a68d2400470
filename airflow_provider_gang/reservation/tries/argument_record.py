"""The one record of every ``GangTrainingOperator`` argument: name, type, default, check and doc.

:data:`ARGUMENTS` lists each argument once, in the order of the operator's signature. Everything
that restates an argument reads it from here:

- ``operators.training.GangTrainingOperator.__init__``: its explicit keyword arguments (what users and
  mypy see) take their defaults from :func:`default`; ``tests/unit/operators/test_argument_record.py``
  holds the signature's names, order, annotations and defaults to this record. The body normalises
  and stores every argument through :func:`normalised`, the class's ``template_fields`` are
  :func:`templated_names`, and its docstring's parameter list is rendered from the record;
- ``@task.gang`` (``decorators.gang``): its decorated operator subclasses the operator and forwards
  ``**kwargs``; a name that is not in the record (nor a ``BaseOperator`` argument) is refused when the
  decorator is applied, with the nearest known name (:func:`unknown`);
- the parse-time checks: :func:`check_arguments` runs each argument's :data:`~.arguments.Check` in
  record order, on :func:`arguments_of` values (defaults filled in from here);
- the described gang (``operators.described_gang``): the ``GangSpec`` field an argument becomes
  (:attr:`Argument.spec_field`), and the neutral value that stands in for Jinja at parse time
  (:attr:`Argument.stand_in`);
- a try's settings (``operators.settings.TrySettings``): the arguments a try reads as they are
  (:attr:`Argument.try_setting`);
- the docs' argument table: ``reservation.tries.argument_table``.

Defaults that Airflow's configuration decides are marked with :attr:`Argument.default_from` and read
by the operator layer (this module imports no Airflow): ``deferrable`` from ``[operators]
default_deferrable`` when the DAG file is parsed; ``cloud`` and ``client_options`` from the
provider's ``[gang]`` section (``reservation.deployment``) when a try starts.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_gang.reservation import checkpoint as checkpoints
from airflow_provider_gang.reservation import cloud, validation
from airflow_provider_gang.reservation.manifests.rank_env import PROVIDER_VARIABLES
from airflow_provider_gang.reservation.spec import DEFAULT_GPU_RESOURCE, DEFAULT_MASTER_PORT
from airflow_provider_gang.reservation.tries import arguments as checks
from airflow_provider_gang.reservation.tries.arguments import Check, OperatorArguments


class Required:
    """The default of an argument that must be given."""

    def __repr__(self) -> str:
        return "required"


REQUIRED = Required()

GROUPS: Mapping[str, str] = {
    "pod": "What every member runs",
    "size": "Size and resources",
    "reservation": "How capacity is reserved, and where",
    "time": "Time limits (each a timedelta or a number of seconds)",
    "retry": "Retries, fallbacks, exit codes and checkpoints",
    "execution": "The end of a try, logs, and how the task waits",
}
"""Group key -> title, in the order the docs show them."""


def _unchanged(value: Any) -> Any:
    return value


def _neutral(stand_in: Any) -> Callable[[Any], Any]:
    """A stand-in that replaces a value holding Jinja by ``stand_in`` (valid, neutral)."""

    def replace(value: Any) -> Any:
        return stand_in if checks.has_jinja(value) else value

    return replace


def _names(names: Iterable[str]) -> str:
    """``names`` as the docs list them: ``A``, ``B`` (in the order given)."""
    return ", ".join(f"``{name}``" for name in names)


REFUSED_ENV = (
    f'{_names(sorted(PROVIDER_VARIABLES))}; with ``distributed="torch"`` also '
    f'{_names(checks.RANK_ENVIRONMENT["torch"])}; with ``"jax"`` {_names(checks.RANK_ENVIRONMENT["jax"])}'
)
"""The ``env`` names the parse-time check refuses (``arguments.check_env``), as the doc lists them."""
RESERVATION_CLOUDS = [name for name, profile in cloud.PROFILES.items() if profile.reservation_label]
"""The built-in cloud profiles ``use_reservation`` works with (the others have no reservation label)."""


def _as_dict(value: Any) -> Any:
    """A mapping as a new ``dict``, ``None`` as ``{}``; anything else unchanged, for a check to name."""
    if value is None:
        return {}
    return dict(value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class Argument:
    """One operator argument. Field by field:

    - ``name``: the keyword; ``annotation``: its type as the operator's signature writes it;
      ``default``: its value when not given (:data:`REQUIRED`: must be given), ``default_from``: the
      Airflow configuration that decides the default instead, when one does;
    - ``doc``: what it means (reStructuredText inline markup), ``group``: a key of :data:`GROUPS`;
    - ``templated``: rendered by Airflow (a ``template_fields`` entry); ``stand_in``: what replaces
      its value at parse time so the rest can be checked (values holding Jinja are judged once rendered);
    - ``normalise``: applied in ``__init__`` (seconds become a ``timedelta``, an iterable a tuple...);
    - ``check``: the parse-time check whose error names this argument (:mod:`.arguments`); the
      arguments with a ``spec_field`` are checked by building the ``GangSpec`` too;
    - ``spec_field``: the ``GangSpec`` field it becomes as it is (empty: it is part of another field,
      e.g. ``image`` of ``pod_template``); ``try_setting``: the ``TrySettings`` field it becomes as it is.
    """

    name: str
    annotation: str
    doc: str
    group: str
    default: Any = None
    default_from: str = ""
    templated: bool = False
    stand_in: Callable[[Any], Any] = _unchanged
    normalise: Callable[[Any], Any] = _unchanged
    check: Check | None = None
    spec_field: str = ""
    try_setting: str = ""


# fmt: off
ARGUMENTS: tuple[Argument, ...] = (
    Argument("size", "int", "Number of members; all start together or none does.", "size", REQUIRED,
             spec_field="size", try_setting="size"),
    Argument("image", "str | None",
             "The trainer container's image. Exactly one of ``image``, ``pod_template``, ``pod_template_file`` "
             "defines the member pod.", "pod",
             templated=True, stand_in=_neutral("image"), check=checks.check_pod_source),
    Argument("command", "Sequence[str] | None",
             "The trainer container's command (a list; with a pod template, applied to its first container).",
             "pod", templated=True, stand_in=_neutral(None),
             check=checks.string_list_check("command", "['python', 'train.py']")),
    Argument("args", "Sequence[str] | None",
             "The trainer container's arguments (a list; with a pod template, applied to its first container).",
             "pod",
             templated=True, stand_in=_neutral(None), check=checks.string_list_check("args", "['--epochs', '3']")),
    Argument("env", "Mapping[str, str] | None",
             "Environment variables of the trainer container (with a pod template, its first container). The "
             f"variables the provider sets are refused: {REFUSED_ENV}.", "pod",
             templated=True, stand_in=_neutral(None), check=checks.check_env),
    Argument("pod_template", "Mapping[str, Any] | None",
             "The member pod as a dict: a Pod, PodTemplate, PodTemplateSpec or PodSpec. Its strings are "
             "rendered with Jinja, as the KubernetesPodOperator renders ``pod_template_dict``.", "pod",
             templated=True, stand_in=_neutral(None)),
    Argument("pod_template_file", "str | None",
             "Path of a YAML file holding the member pod (any shape ``pod_template`` takes); the path is "
             "rendered with Jinja.", "pod",
             templated=True, stand_in=_neutral(None)),
    Argument("min_size", "int | None",
             "The smallest acceptable gang: the floor of Kueue partial admission and of ``ShrinkTo`` "
             "(default: ``size``, all or nothing).", "size",
             check=checks.check_jax_partial_admission, spec_field="min_size"),
    Argument("gpus", "int",
             "GPUs per member; members with GPUs tolerate the ``<gpu_resource>:NoSchedule`` taint (as GKE's "
             "``ExtendedResourceToleration`` admission would add).", "size", 0),
    Argument("cpu", "str | None", "CPU per member, a Kubernetes quantity (``\"4\"``, ``\"500m\"``).", "size"),
    Argument("memory", "str | None", "Memory per member, a Kubernetes quantity (``\"16Gi\"``).", "size"),
    Argument("gpu_resource", "str", "The extended resource name of a GPU.", "size", DEFAULT_GPU_RESOURCE),
    Argument("distributed", "str | None",
             "``\"torch\"``: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` and "
             "torchrun's ``PET_*``; ``\"jax\"``: ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, "
             "``JAX_PROCESS_ID``; both with a headless Service for the rendezvous. Every member gets "
             "``GANG_NAME``, ``GANG_RANK``, ``GANG_SIZE``, ``GANG_ORIGINAL_SIZE`` in any case.", "pod",
             check=checks.check_distributed, spec_field="distributed"),
    Argument("master_port", "int", "The rendezvous port on rank 0.", "pod", DEFAULT_MASTER_PORT,
             spec_field="master_port"),
    Argument("reservation", "str",
             "``\"provisioning_request\"`` (PodTemplate + ProvisioningRequest, members created once "
             "provisioned), ``\"gates\"`` (the same, members created up front behind a scheduling gate), "
             "``\"kueue\"`` (a suspended Indexed Job in ``kueue_queue``), ``\"workload\"`` (a PodGroup the "
             "kube-scheduler binds all at once), ``\"auto\"`` (``workload`` where the cluster serves it, "
             "else ``gates``, per try).", "reservation", "provisioning_request",
             check=checks.check_mode, spec_field="mode", try_setting="mode"),
    Argument("provisioning_class", "str | None",
             f"The ProvisioningRequest class (default for ``provisioning_request`` and ``gates``: "
             f"``{validation.BEST_EFFORT_ATOMIC}``); refused with ``kueue``, ``workload`` and ``auto``.",
             "reservation", spec_field="provisioning_class"),
    Argument("provisioning_parameters", "Mapping[str, str] | None",
             "The ProvisioningRequest's parameters (e.g. ``maxRunDurationSeconds`` for "
             "``queued-provisioning.gke.io``).", "reservation",
             normalise=_as_dict, spec_field="provisioning_parameters"),
    Argument("kueue_queue", "str | None",
             "The Kueue LocalQueue (``reservation=\"kueue\"``). Not ``queue``: that is ``BaseOperator``'s "
             "executor queue.", "reservation",
             templated=True, stand_in=_neutral("queue"), spec_field="queue"),
    Argument("zone", "str | None",
             "The zone members are placed in (``topology.kubernetes.io/zone``), preferred.", "reservation",
             templated=True, stand_in=_neutral("zone"), spec_field="zone"),
    Argument("strict_zone", "bool", "Require ``zone`` instead of preferring it.", "reservation", False,
             spec_field="strict_zone"),
    Argument("required_topology", "str | None",
             "A node label (e.g. ``cloud.google.com/gce-topology-subblock``, a rack): every member in one domain "
             "of it, or none starts. ``kueue``: Kueue's Topology Aware Scheduling (the queue's flavor needs a "
             "Topology with that level); ``workload``: the PodGroup's topology constraint (feature gate "
             "``TopologyAwareWorkloadScheduling``); ``gates``, ``provisioning_request``: the operator chooses the "
             "domain before creating anything and pins the members to it. Not with ``preferred_topology``.",
             "reservation", spec_field="required_topology"),
    Argument("preferred_topology", "str | None",
             "A node label whose domains the members span as few of as possible; never refused for it. "
             "``kueue`` and ``gates``/``provisioning_request`` only: ``workload`` has no preferred form.",
             "reservation", spec_field="preferred_topology"),
    Argument("spot", "bool",
             "Place members on the cloud's spot capacity (its spot label, tolerating its spot taint if it has "
             "one); ``False`` requires nodes without the spot label, as GKE leaves spot pools untainted by default.",
             "reservation", False, spec_field="spot"),
    Argument("use_reservation", "str | None",
             "The name of a specific reservation every member must consume: a required node affinity "
             "``<reservation label> In [<name>]`` on every member and on the ProvisioningRequest's PodTemplate. "
             "Refused with ``spot=True`` (a reservation serves on-demand VMs only) and on a cloud profile "
             f"without a reservation label (built-in profiles with one: {_names(RESERVATION_CLOUDS)}).",
             "reservation", spec_field="reservation_name"),
    Argument("cloud", "str | CloudProfile | None",
             "``\"gke\"``, ``\"eks\"``, ``\"karpenter\"``, ``\"aks\"`` or a ``reservation.cloud.CloudProfile``: "
             "the spot, on-demand, reservation and reclaimed-node labels and taints. Unset: the connection's "
             "extra ``cloud``, else ``[gang] default_cloud``.", "reservation",
             default_from="[gang] default_cloud"),
    Argument("namespace", "str", "The namespace of every object of the gang.", "reservation", "default",
             templated=True, stand_in=_neutral("default"), spec_field="namespace", try_setting="namespace"),
    Argument("labels", "Mapping[str, str] | None", "Extra labels on every object of the gang.", "reservation",
             templated=True, stand_in=_neutral({}), normalise=_as_dict, spec_field="labels"),
    Argument("reservation_timeout", "timedelta | float",
             "Per try: how long to wait for the reservation (never upstream's 7 days).", "time",
             timedelta(minutes=30), normalise=checks.as_duration, try_setting="reservation_timeout",
             check=checks.duration_check("reservation_timeout", optional=False, example="timedelta(minutes=30)")),
    Argument("startup_timeout", "timedelta | float",
             "After launch: how long until every member runs (binding, image pull, start).", "time",
             timedelta(minutes=10), normalise=checks.as_duration, try_setting="startup_timeout",
             check=checks.duration_check("startup_timeout", optional=False, example="timedelta(minutes=10)")),
    Argument("run_timeout", "timedelta | float | None",
             "How long the whole run may take once every member runs.", "time",
             normalise=checks.as_duration, try_setting="run_timeout",
             check=checks.duration_check("run_timeout", optional=True, example="timedelta(hours=6)")),
    Argument("start_by", "timedelta | float | None",
             "How long after the run's data interval end the gang may still start, across all tries; past it "
             "the task fails without retrying instead of queueing behind the next run.", "time",
             normalise=checks.as_duration, try_setting="start_by",
             check=checks.duration_check("start_by", optional=True, example="timedelta(hours=4)")),
    Argument("unreachable_timeout", "timedelta | float",
             "How long every wait tolerates an API server that does not answer before the try fails "
             "(retryable) with ``cluster_unreachable``.", "time",
             timedelta(minutes=10), normalise=checks.as_duration, try_setting="unreachable_timeout",
             check=checks.duration_check("unreachable_timeout", optional=False, example="timedelta(minutes=10)")),
    Argument("fallbacks", "Sequence[fallback.FallbackStep]",
             "The ladder of ``reservation.fallback`` steps later tries walk down (``RetryAsIs``, ``ShrinkTo``, "
             "``OtherZone``, ``OtherProvisioningClass``, ``OtherQueue``, ``OnDemand``, ``UseReservation``, "
             "``LeaveReservation``, ``OtherCluster``, ``LoosenTopology``); set ``retries`` to the tries it uses.",
             "retry", (),
             normalise=checks.check_fallbacks_shape),
    Argument("checkpoint", "str | PersistentVolumeCheckpoint | None",
             "Where every try of one DAG run saves: a URI or absolute path (e.g. "
             "``\"gs://bucket/{{ dag.dag_id }}/{{ run_id }}\"``) or a ``PersistentVolumeCheckpoint``; members "
             "learn whether to resume (``GANG_RESUME``).", "retry",
             templated=True, stand_in=checkpoints.stand_in),
    Argument("retry_on_exit_codes", "Iterable[int]",
             "Exit codes (1..255, none also in ``fail_on_exit_codes``) that make a try retryable "
             "(``member_exit_retryable``).", "retry", (),
             normalise=checks.as_exit_codes, spec_field="retry_on_exit_codes"),
    Argument("fail_on_exit_codes", "Iterable[int]",
             "Exit codes (1..255) that end the task without retrying (``member_exit_fails_for_good``).",
             "retry", (), normalise=checks.as_exit_codes, spec_field="fail_on_exit_codes"),
    Argument("on_finish", "str",
             "``\"delete\"``: nothing is left when the task ends; ``\"keep\"``: after a success the finished "
             "member pods stay for inspection, with the owner ConfigMap ``<gang>`` that owns them (``kueue``: "
             "the finished Job); deleting that ConfigMap removes the rest. A failed try is always deleted.",
             "execution", "delete",
             check=checks.check_on_finish, try_setting="on_finish"),
    Argument("log_ranks", "Sequence[int] | str",
             "The members whose logs are copied into the task log (or ``\"all\"``).", "execution", (0,),
             check=checks.check_log_ranks, try_setting="log_ranks"),
    Argument("deferrable", "bool",
             "Wait in the triggerer, holding no worker slot; blocking runs the same triggers in the worker.",
             "execution", False, default_from="[operators] default_deferrable", check=checks.check_deferrable),
    Argument("kubernetes_conn_id", "str",
             "A cncf-kubernetes ``kubernetes`` connection, resolved by its ``KubernetesHook``.", "execution",
             "kubernetes_default", check=checks.check_connection_id, try_setting="kubernetes_conn_id"),
    Argument("client_options", "Mapping[str, float] | None",
             "How patient and how fast every API call of a try is: ``request_timeout``, ``retry_attempts``, "
             "``retry_base_delay``, ``retry_max_delay``, ``qps``, ``burst``, ``max_parallel_requests``. A key "
             "not given takes its ``[gang] client_<key>`` option.",
             "execution",
             default_from="[gang] client_*", normalise=_as_dict, check=checks.check_client_options),
    Argument("multikueue_connections", "Mapping[str, str] | None",
             "On a Kueue MultiKueue manager's ``kueue_queue``: the ``kubernetes`` connection of each worker "
             "cluster, by MultiKueueCluster name (``{\"worker-1\": \"kube_worker1\"}``); the gang is followed on "
             "the worker that admitted it through its connection (members, rank logs, exit codes, teardown "
             "there). A worker without one still runs the gang, followed through the manager's mirrored Job "
             "status only.", "reservation",
             default_from="[gang] multikueue_connections", check=checks.check_multikueue_connections),
)
# fmt: on
BY_NAME: Mapping[str, Argument] = {argument.name: argument for argument in ARGUMENTS}


def names() -> tuple[str, ...]:
    """Every argument's name, in the signature's order."""
    return tuple(BY_NAME)


def default(name: str) -> Any:
    """The default of argument ``name`` (``KeyError`` for a name that is no argument)."""
    return BY_NAME[name].default


def normalised(name: str, value: Any) -> Any:
    """``value`` of argument ``name`` as the operator stores it (:attr:`Argument.normalise`)."""
    return BY_NAME[name].normalise(value)


def templated_names() -> tuple[str, ...]:
    """The arguments Airflow renders: the operator's ``template_fields``."""
    return tuple(argument.name for argument in ARGUMENTS if argument.templated)


def try_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``TrySettings`` fields taken as they are from ``values`` (argument name -> value)."""
    return {argument.try_setting: values[argument.name] for argument in ARGUMENTS if argument.try_setting}


def argument_of_spec_field(field: str) -> str:
    """The argument a user wrote for ``GangSpec`` field ``field`` (``queue`` -> ``kueue_queue``)."""
    return next((argument.name for argument in ARGUMENTS if argument.spec_field == field), field)


def arguments_of(values: Mapping[str, Any] = {}, /, **given: Any) -> OperatorArguments:
    """Every argument's value: ``values`` and ``given``, the record's default for the rest.
    ``TypeError`` for a name that is no argument or a required argument missing."""
    given = {**values, **given}
    wrong = unknown(given)
    if wrong:
        raise TypeError(f"not GangTrainingOperator arguments: {', '.join(wrong)}")
    missing = [argument.name for argument in ARGUMENTS if argument.default is REQUIRED and argument.name not in given]
    if missing:
        raise TypeError(f"missing GangTrainingOperator argument(s): {', '.join(missing)}")
    return OperatorArguments({argument.name: given.get(argument.name, argument.default) for argument in ARGUMENTS})


def check_arguments(arguments: OperatorArguments, *, rendered: bool) -> None:
    """Raise ``GangArgumentError`` for the first invalid argument, in record order (module docstring).

    With ``rendered=False`` (parse time) a value that still holds Jinja is not judged; it is checked
    again after rendering.
    """
    for argument in ARGUMENTS:
        if argument.check is not None:
            argument.check(arguments, rendered)


def unknown(given: Iterable[str], *, also_known: Iterable[str] = ()) -> list[str]:
    """Each name of ``given`` that is neither an argument nor in ``also_known``, with the nearest
    known name when one is close (``"sizee (did you mean 'size'?)"``)."""
    known = [*names(), *also_known]
    found = []
    for name in given:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1)
        found.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    return found
