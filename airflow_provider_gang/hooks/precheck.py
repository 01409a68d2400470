"""Fail fast before anything of a gang is created: the API kinds its mode needs are served, the
connection's identity holds every permission a try uses, and what the cluster offers can serve the gang
(``hooks.cluster_fit``: a kueue gang's LocalQueue and ClusterQueue; a warning for a zone no node is in).

Kinds are read from discovery (``kube.discovery.served_plurals``, once per API version); permissions are asked with one
SelfSubjectAccessReview each (``kube.discovery.can_i``,
https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access), which every
authenticated user may create (``system:basic-user``). A failure names what is missing and how to fix
it; it is never retried (the same try on the same cluster cannot do better). A passed precheck says
whether a kueue gang's ClusterQueue dispatches to worker clusters through Kueue's MultiKueue
(:class:`PrecheckResult`, ``hooks.multikueue``).

:data:`NEEDS` is the one list of the API calls a try makes - the cluster actions (``hooks.creation``,
``hooks.inspection``, ``hooks.deletion``), both triggers (``triggers.base``, ``triggers.kill``) and
this precheck's own reads - as RBAC verbs on resources
(https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb):
``get``/``list``/``watch``/``create``/``patch``/``delete``, a LIST with a field selector is still
``list``, a DELETE with preconditions still ``delete``, a pod's log is ``get`` on ``pods/log``.
``deploy/rbac.yaml`` grants exactly this list per mode, and ``tests/e2e/test_rbac.py`` checks that the
two agree, that a gang runs with nothing more, and that each single permission removed is caught here.
Discovery (``/api``, ``/apis``) and SelfSubjectAccessReviews need no grant: the bootstrap ClusterRoles
``system:discovery`` and ``system:basic-user`` give them to every authenticated user
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/#discovery-roles). Two calls are cluster-scoped:
a kueue gang's precheck reads its LocalQueue's ClusterQueue and that queue's AdmissionChecks (both
cluster-scoped, Kueue ``clusterqueue_types.go``, ``admissioncheck_types.go``), so that mode also needs a
ClusterRole; the SelfSubjectAccessReviews for them are asked without a namespace
(``ResourceAttributes.namespace`` empty means all namespaces and cluster-scoped kinds, https://kubernetes.io/docs/reference/kubernetes-api/authorization-resources/self-subject-access-review-v1/).
``list nodes`` (the zone warning) is optional and not in :data:`NEEDS`: without it the check is skipped.

A ``list`` or ``watch`` granted only through a rule's ``resourceNames`` does not cover a LIST or WATCH of
the collection (RBAC matches resourceNames only against a request's object name; a collection request
has none), and a gang's watches are of the collection, by label selector, because its object names change
with every try. When such a permission is denied for the collection but allowed for the gang's own
object name, the refusal says so and names the rule to add (``resourceNames``-free) instead of only
"missing permission".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from airflow_provider_gang.hooks import cluster_fit, multikueue, topology_check, workload_api_check
from airflow_provider_gang.kube import discovery
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    CONFIG_MAPS,
    JOBS,
    LOCAL_QUEUES,
    NODES,
    POD_GROUPS,
    POD_TEMPLATES,
    PODS,
    PODS_OF_EVERY_NAMESPACE,
    PROVISIONING_REQUESTS,
    RESOURCE_FLAVORS,
    SERVICES,
    TOPOLOGIES,
    WORKLOADS,
    Resource,
)
from airflow_provider_gang.reservation.spec import GangSpec, ReservationMode


class PrecheckFailed(Exception):
    """The cluster cannot run this gang: an API kind is not served, a permission is missing, or the
    gang's Kueue queue cannot admit it."""


@dataclass(frozen=True)
class Permission:
    """One RBAC permission: ``verb`` on ``resource`` (optionally its ``subresource``), in the gang's
    namespace or, for a cluster-scoped ``resource`` (``Resource.namespaced`` false), cluster-wide.

    ``used_by`` says which call needs it (for the failure message); it is not part of equality.
    """

    verb: str
    resource: Resource
    subresource: str = ""
    used_by: str = field(default="", compare=False)

    @property
    def cluster_scoped(self) -> bool:
        """Granted by a ClusterRole, asked without a namespace."""
        return not self.resource.namespaced

    @property
    def rbac_resource(self) -> str:
        """The resource as an RBAC rule names it: ``pods``, ``pods/log``."""
        return f"{self.resource.plural}/{self.subresource}" if self.subresource else self.resource.plural

    def __str__(self) -> str:
        """``get pods/log``, ``create provisioningrequests.autoscaling.x-k8s.io`` (kubectl's spelling)."""
        group = f".{self.resource.group}" if self.resource.group else ""
        return f"{self.verb} {self.rbac_resource}{group}"


@dataclass(frozen=True)
class Need:
    """A :class:`Permission` and when a try needs it: in which ``modes``, and whether only for a
    ``distributed`` gang (the only kind of gang with a headless Service) or only for a gang with a
    topology (``required_topology`` / ``preferred_topology``)."""

    permission: Permission
    modes: frozenset[ReservationMode]
    distributed_only: bool = False
    topology_only: bool = False


_ALL = frozenset(ReservationMode)
_REQUEST = frozenset({ReservationMode.PROVISIONING_REQUEST, ReservationMode.GATES})
_GATES = frozenset({ReservationMode.GATES})
_KUEUE = frozenset({ReservationMode.KUEUE})
_WORKLOAD = frozenset({ReservationMode.WORKLOAD})
_MEMBERS_UP_FRONT = _REQUEST | _WORKLOAD


def _need(
    verb: str,
    resource: Resource,
    modes: frozenset[ReservationMode],
    used_by: str,
    *,
    subresource: str = "",
    distributed_only: bool = False,
    topology_only: bool = False,
) -> Need:
    return Need(Permission(verb, resource, subresource, used_by), modes, distributed_only, topology_only)


NEEDS: tuple[Need, ...] = (
    _need("create", CONFIG_MAPS, _ALL, "claim_owner creates the owner; publish_world the world ConfigMap"),
    _need("patch", CONFIG_MAPS, _ALL, "claim_owner marks an adopted owner; publish_world corrects a size"),
    _need("get", CONFIG_MAPS, _ALL, "adoption and on_kill read the owner; publish_world adopts"),
    _need("list", CONFIG_MAPS, _ALL, "teardown, withdraw and on_kill find the gang by label"),
    _need("delete", CONFIG_MAPS, _ALL, "teardown; on_kill's compare-and-delete"),
    _need("create", PODS, _MEMBERS_UP_FRONT, "members (gates: up front, gated; workload: up front, linked)"),
    _need("get", PODS, _MEMBERS_UP_FRONT, "adopting members an earlier worker created"),
    _need("patch", PODS, _GATES, "releasing the scheduling gates"),
    _need("list", PODS, _ALL, "the triggers' watches, launch, read_logs, teardown"),
    _need("watch", PODS, _ALL, "the triggers' watches"),
    _need("delete", PODS, _ALL, "teardown, on_kill (kueue: the Job's pods)"),
    _need("get", PODS, _ALL, "copying log_ranks' logs into the task log", subresource="log"),
    _need("create", SERVICES, _ALL, "the members' headless Service", distributed_only=True),
    _need("get", SERVICES, _ALL, "adopting the headless Service", distributed_only=True),
    _need("list", SERVICES, _ALL, "teardown, withdraw and on_kill"),
    _need("delete", SERVICES, _ALL, "teardown, on_kill", distributed_only=True),
    _need("create", POD_TEMPLATES, _REQUEST, "the ProvisioningRequest's PodTemplate"),
    _need("get", POD_TEMPLATES, _REQUEST, "adopting the PodTemplate"),
    _need("list", POD_TEMPLATES, _REQUEST, "teardown, withdraw and on_kill"),
    _need("delete", POD_TEMPLATES, _REQUEST, "teardown, on_kill"),
    _need("create", PROVISIONING_REQUESTS, _REQUEST, "the reservation"),
    _need("get", PROVISIONING_REQUESTS, _REQUEST, "adopting it; the recheck before launch"),
    _need("list", PROVISIONING_REQUESTS, _REQUEST, "the triggers' watches; teardown, withdraw and on_kill"),
    _need("watch", PROVISIONING_REQUESTS, _REQUEST, "the triggers' watches"),
    _need("delete", PROVISIONING_REQUESTS, _REQUEST, "teardown, on_kill"),
    _need("create", JOBS, _KUEUE, "the suspended Job"),
    _need("get", JOBS, _KUEUE, "adopting the Job"),
    _need("list", JOBS, _KUEUE, "teardown, withdraw and on_kill; the run trigger's watch (MultiKueue)"),
    _need("watch", JOBS, _KUEUE, "the run trigger follows a MultiKueue manager's mirror of the worker's Job"),
    _need("delete", JOBS, _KUEUE, "teardown, on_kill"),
    _need("list", WORKLOADS, _KUEUE, "the triggers' watches"),
    _need("watch", WORKLOADS, _KUEUE, "the triggers' watches"),
    _need("get", LOCAL_QUEUES, _KUEUE, "precheck: the gang's LocalQueue exists and is active"),
    _need("list", LOCAL_QUEUES, _KUEUE, "precheck: naming the LocalQueues there when it does not"),
    _need("get", CLUSTER_QUEUES, _KUEUE, "precheck: its ClusterQueue is active and covers the resources"),
    _need("get", ADMISSION_CHECKS, _KUEUE, "precheck: whether the ClusterQueue dispatches through MultiKueue"),
    _need("create", POD_GROUPS, _WORKLOAD, "the gang's PodGroup"),
    _need("get", POD_GROUPS, _WORKLOAD, "adopting it; the recheck before launch"),
    _need("list", POD_GROUPS, _WORKLOAD, "the triggers' watches; teardown, withdraw and on_kill"),
    _need("watch", POD_GROUPS, _WORKLOAD, "the triggers' watches"),
    _need("delete", POD_GROUPS, _WORKLOAD, "teardown, on_kill"),
    _need("list", NODES, _ALL, "topology: the room on the nodes, the domain of every rank", topology_only=True),
    _need(
        "list", PODS_OF_EVERY_NAMESPACE, _ALL, "topology: the room the pods of every namespace take", topology_only=True
    ),
    _need("get", RESOURCE_FLAVORS, _KUEUE, "precheck: the queue's flavors have a topology", topology_only=True),
    _need("get", TOPOLOGIES, _KUEUE, "precheck: their Topology has the gang's level", topology_only=True),
)
"""Every API call of a try, as permissions, and when it is made (see the module docstring)."""

WORKER_NEEDS: tuple[Need, ...] = (
    _need("get", JOBS, _KUEUE, "the worker's copy of the Job (it owns the rendezvous Service there)"),
    _need("list", JOBS, _KUEUE, "teardown, withdraw and on_kill there"),
    _need("delete", JOBS, _KUEUE, "teardown, on_kill there"),
    _need("list", PODS, _KUEUE, "the run trigger's watch, read_logs, teardown"),
    _need("watch", PODS, _KUEUE, "the run trigger's watch"),
    _need("delete", PODS, _KUEUE, "teardown, on_kill there"),
    _need("get", PODS, _KUEUE, "copying log_ranks' logs into the task log", subresource="log"),
    _need("create", SERVICES, _KUEUE, "the members' headless Service there", distributed_only=True),
    _need("get", SERVICES, _KUEUE, "adopting the headless Service", distributed_only=True),
    _need("list", SERVICES, _KUEUE, "teardown, withdraw and on_kill there"),
    _need("delete", SERVICES, _KUEUE, "teardown, on_kill there", distributed_only=True),
    _need("list", CONFIG_MAPS, _KUEUE, "teardown, withdraw and on_kill look for every kind of the gang"),
    _need("list", WORKLOADS, _KUEUE, "the run trigger's watch of the worker's copy of the Workload"),
    _need("watch", WORKLOADS, _KUEUE, "the run trigger's watch"),
)
"""Every API call of a try on a Kueue MultiKueue worker it follows through a mapped connection
(``operators.dispatched``); ``deploy/rbac-multikueue-worker.yaml`` grants exactly this list."""


def kinds_needed(spec: GangSpec) -> list[Resource]:
    """The API kinds that must be served for ``spec``'s mode (ProvisioningRequest v1, or Kueue)."""
    kinds = [CONFIG_MAPS, PODS, SERVICES]
    if spec.mode is ReservationMode.KUEUE:
        kinds += [JOBS, WORKLOADS, LOCAL_QUEUES, CLUSTER_QUEUES, ADMISSION_CHECKS]
    elif spec.mode is ReservationMode.WORKLOAD:
        kinds += [POD_GROUPS]
    else:
        kinds += [POD_TEMPLATES, PROVISIONING_REQUESTS]
    return kinds


def permissions_needed(spec: GangSpec, needs: tuple[Need, ...] = NEEDS) -> list[Permission]:
    """Exactly the permissions a try of ``spec`` uses, in ``needs`` order (:data:`NEEDS`, or
    :data:`WORKER_NEEDS` on a MultiKueue worker). Pure."""
    return [
        need.permission
        for need in needs
        if spec.mode in need.modes
        and (spec.distributed is not None or not need.distributed_only)
        and (spec.topology_label is not None or not need.topology_only)
    ]


@dataclass(frozen=True)
class PrecheckResult:
    """What a passed precheck found: ``warnings`` for the caller to log (a zone no node is in yet),
    which never refuse the gang, and the name of the MultiKueue admission check of a kueue gang's
    ClusterQueue (``multikueue_check``; ``None``: the cluster runs the gang itself)."""

    warnings: list[str] = field(default_factory=list)
    multikueue_check: str | None = None


async def precheck(client: KubeClient, spec: GangSpec) -> PrecheckResult:
    """Raise :class:`PrecheckFailed` naming every kind not served (first), every permission of
    :func:`permissions_needed` the connection lacks (as ``get pods/log``; in ``spec.namespace`` or
    cluster-wide), why the gang's Kueue queue cannot admit it, or why its mode cannot honour its
    topology on this cluster (``hooks.topology_check``); creates nothing."""
    if spec.mode is ReservationMode.WORKLOAD:
        refusal = await workload_api_check.refusal(client)
        if refusal is not None:
            raise PrecheckFailed(refusal)
    served: dict[str, frozenset[str]] = {}
    missing_kinds = []
    for kind in kinds_needed(spec):
        if kind.api_version not in served:
            served[kind.api_version] = await discovery.served_plurals(client, kind.api_version)
        if kind.plural not in served[kind.api_version]:
            missing_kinds.append(f"{kind.plural}.{kind.group or 'core'}/{kind.version}")
    if missing_kinds:
        raise PrecheckFailed(
            f"the cluster does not serve {', '.join(missing_kinds)}, needed by reservation={spec.mode.value!r}; "
            "install the CRD / controller (cluster-autoscaler ProvisioningRequest v1, or Kueue) or change the mode"
        )
    await _check_permissions(client, spec)
    dispatching = None
    if spec.mode is ReservationMode.KUEUE:
        refusal, cluster_queue = await cluster_fit.read_queue(client, spec)
        if refusal is not None:
            raise PrecheckFailed(refusal)
        dispatching = await multikueue.dispatching_check(client, cluster_queue)
    refusal = await topology_check.refusal(client, spec, cluster_fit.requested_resources(spec))
    if refusal is not None:
        raise PrecheckFailed(refusal)
    return PrecheckResult(await cluster_fit.zone_warnings(client, spec), dispatching)


async def worker_refusal(client: KubeClient, spec: GangSpec, worker: str) -> str | None:
    """Why the connection of MultiKueue worker cluster ``worker`` (``client``'s) cannot follow the gang
    there - the permissions of :data:`WORKER_NEEDS` it lacks in ``spec.namespace`` - or ``None``."""
    wanted = permissions_needed(spec, WORKER_NEEDS)
    answers = await asyncio.gather(
        *(
            discovery.can_i(client, need.verb, need.resource, spec.namespace, subresource=need.subresource)
            for need in wanted
        )
    )
    denied = [f"{need} ({need.used_by})" for need, answer in zip(wanted, answers, strict=True) if not answer.allowed]
    if not denied:
        return None
    return (
        f"missing permission on MultiKueue worker cluster {worker!r} in namespace {spec.namespace!r}: "
        f"{', '.join(denied)}; grant them to the identity of its connection (Role + RoleBinding, see "
        "deploy/rbac-multikueue-worker.yaml)"
    )


async def _check_permissions(client: KubeClient, spec: GangSpec) -> None:
    wanted = permissions_needed(spec)
    answers = await asyncio.gather(
        *(
            discovery.can_i(client, need.verb, need.resource, spec.namespace, subresource=need.subresource)
            for need in wanted
        )
    )
    denied = [need for need, answer in zip(wanted, answers, strict=True) if not answer.allowed]
    if not denied:
        return
    named_only = await _granted_only_by_name(client, spec, denied)
    if named_only:
        raise PrecheckFailed(_named_only_refusal(spec, named_only))
    in_namespace = [f"{need} ({need.used_by})" for need in denied if not need.cluster_scoped]
    cluster_wide = [f"{need} ({need.used_by})" for need in denied if need.cluster_scoped]
    missing = [f"missing permission in namespace {spec.namespace!r}: {', '.join(in_namespace)}"] if in_namespace else []
    if cluster_wide:
        missing.append(f"missing cluster-wide permission: {', '.join(cluster_wide)}")
    grants = [
        kind
        for kind, needed in (("Role + RoleBinding", in_namespace), ("ClusterRole + ClusterRoleBinding", cluster_wide))
        if needed
    ]
    raise PrecheckFailed(
        f"{'; '.join(missing)}; grant them to the connection's identity ({' and '.join(grants)}, see "
        f"deploy/rbac.yaml for reservation={spec.mode.value!r})"
    )


async def _granted_only_by_name(client: KubeClient, spec: GangSpec, denied: list[Permission]) -> list[Permission]:
    """The ``list``/``watch`` permissions of ``denied`` the connection holds for this try's object
    name (``spec.name``, the name of every object of the gang) but not for the collection: granted
    through a rule's ``resourceNames`` only."""
    collection = [need for need in denied if need.verb in ("list", "watch") and not need.cluster_scoped]
    answers = await asyncio.gather(
        *(
            discovery.can_i(
                client, need.verb, need.resource, spec.namespace, subresource=need.subresource, name=spec.name
            )
            for need in collection
        )
    )
    return [need for need, answer in zip(collection, answers, strict=True) if answer.allowed]


def _named_only_refusal(spec: GangSpec, named_only: list[Permission]) -> str:
    """Why a ``resourceNames``-only ``list``/``watch`` cannot serve a gang, and the rules to add."""
    rules = "; ".join(
        f"{{apiGroups: [{need.resource.group!r}], resources: [{need.rbac_resource!r}], verbs: [{need.verb!r}]}}"
        for need in named_only
    )
    granted = ", ".join(f"{need} ({need.used_by})" for need in named_only)
    return (
        f"{granted} is granted in namespace {spec.namespace!r} only through resourceNames: a gang lists and "
        "watches the whole collection by label selector, and its object names change with every try, so "
        "RBAC needs a rule without resourceNames; add to the connection's Role (deploy/rbac.yaml, "
        f"reservation={spec.mode.value!r}): {rules}"
    )
