"""Recorded versions reduced to sequences that two clusters running the same gang can be compared on.

Pure functions over what :class:`tests.real.recording.Recorder` keeps (every watched version of a
kind, oldest first). Each reduction drops what differs between any two runs of the same scenario -
names, uids, generated suffixes, timestamps, the number of writes that carried the same state, the
order of writes that upstream does not order - and keeps what the provider reads:

- conditions of a ProvisioningRequest, a Kueue Workload or a PodGroup, per condition type: its ``(status, reason)``
  changes in order (the meaning of each is in the autoscaler's ``proposals/provisioning-request.md``
  and Kueue's ``apis/kueue/v1beta2/workload_types.go``);
- per object, the order of the milestones upstream does order (:data:`REQUEST_MILESTONES`,
  :data:`WORKLOAD_MILESTONES`); conditions of different types that upstream writes from
  independent reconcilers (Kueue's ``PodsReady=False/WaitForStart`` against ``QuotaReserved``) are
  not ordered against each other;
- a Workload's admission-check states per check name (``Pending``, ``Ready``, ``Retry``,
  ``Rejected``; Kueue ``workload_types.go`` ``AdmissionCheckState``);
- a member pod's phases and its ``PodScheduled`` condition, per rank;
- per member, the order of its scheduling-gate removal and its binding (``spec.nodeName`` first set):
  KEP-3521 requires the gate gone before the scheduler binds; per gang, whether every member was
  created before the first gate went (the provider's gates-mode contract; when the scheduler binds
  each released member is not ordered against the next member's release).

Objects are named by role and order of first appearance (``provisioningrequest 1``, ``gang 2 rank 0``):
the gang's generated names and Kueue's generated Workload and request names differ between runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from airflow_provider_gang.reservation import naming

Step = tuple[str, ...]
Sequence = tuple[Step, ...]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The Job controller's annotation and label with a member's index (``pkg/controller/job/indexed_job_utils.go``)."""


def created_at(obj: dict[str, Any]) -> float:
    """``metadata.creationTimestamp`` in epoch seconds (RFC 3339, second precision)."""
    stamp = obj["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def by_object(versions: Iterable[dict[str, Any]], *, since: float) -> list[list[dict[str, Any]]]:
    """Versions grouped per object (by uid) in order of first appearance; objects created before ``since`` dropped.

    ``since`` is epoch seconds; a watch started without a resourceVersion first lists what exists,
    and creation timestamps have second precision, so pass the start of the recording less a second.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for obj in versions:
        if created_at(obj) >= since:
            groups.setdefault(obj["metadata"]["uid"], []).append(obj)
    return list(groups.values())


def _transitions(states: Iterable[Step]) -> Sequence:
    """``states`` with each run of equal consecutive states kept once."""
    kept: list[Step] = []
    for state in states:
        if not kept or kept[-1] != state:
            kept.append(state)
    return tuple(kept)


Milestone = tuple[str, str | None]
"""A condition type and the status it reaches (``None``: any status)."""

REQUEST_MILESTONES: tuple[Milestone, ...] = (("Accepted", "True"), ("Provisioned", None), ("BookingExpired", "True"))
"""The cluster-autoscaler accepts a request before it answers ``Provisioned`` (``True`` or ``False``),
and a booking expires only once provisioned (``pkg/provisioningrequest/besteffortatomic/provisioning_class.go``,
``pkg/provisioningrequest/checkcapacity/provisioningclass.go``, ``pkg/processors/provreq/processor.go``)."""

WORKLOAD_MILESTONES: tuple[Milestone, ...] = (("QuotaReserved", "True"), ("Admitted", "True"), ("PodsReady", "True"))
POD_GROUP_MILESTONES: tuple[Milestone, ...] = (
    ("PodGroupInitiallyScheduled", "False"),
    ("PodGroupInitiallyScheduled", "True"),
)
"""A PodGroup's scheduling outcomes (KEP-4671, ``scheduling/v1beta1/types.go``): ``True`` is terminal."""
"""Kueue admits only a Workload with reserved quota (``pkg/workload/admissionchecks.go``
``SyncAdmittedCondition``) and unsuspends the Job, whose pods then become ready, only once admitted
(``pkg/controller/jobframework/reconciler.go``)."""


def _conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def condition_transitions(versions: Iterable[dict[str, Any]]) -> dict[str, Sequence]:
    """Per condition type of ``status.conditions`` over the versions of one object, its
    ``(status, reason)`` changes in order; a condition kept unchanged over several versions counts once."""
    per_type: dict[str, list[Step]] = {}
    for obj in versions:
        for condition in _conditions(obj):
            per_type.setdefault(condition["type"], []).append((condition["status"], condition.get("reason", "")))
    return {kind: _transitions(steps) for kind, steps in per_type.items()}


def milestone_order(versions: Iterable[dict[str, Any]], milestones: tuple[Milestone, ...]) -> Sequence:
    """The ``milestones`` one object reached, in the order of the first version showing each; milestones
    first shown in the same version count in the order given (one write may carry several)."""
    first: dict[Milestone, int] = {}
    for index, obj in enumerate(versions):
        for condition in _conditions(obj):
            for milestone in milestones:
                kind, status = milestone
                if condition["type"] == kind and status in (None, condition["status"]) and milestone not in first:
                    first[milestone] = index
    reached = sorted(first, key=lambda milestone: (first[milestone], milestones.index(milestone)))
    return tuple((kind, status or "any") for kind, status in reached)


def admission_check_states(versions: Iterable[dict[str, Any]]) -> dict[str, Sequence]:
    """Per admission check of one Workload, the states it went through (``status.admissionChecks``)."""
    states: dict[str, list[Step]] = {}
    for obj in versions:
        for check in (obj.get("status") or {}).get("admissionChecks") or []:
            states.setdefault(check["name"], []).append((check["state"],))
    return {name: _transitions(sequence) for name, sequence in states.items()}


def phases(versions: Iterable[dict[str, Any]]) -> Sequence:
    """``status.phase`` of one pod over its versions, each change once."""
    return _transitions(((obj.get("status") or {}).get("phase") or "",) for obj in versions)


def pod_scheduled(versions: Iterable[dict[str, Any]]) -> Sequence:
    """The ``PodScheduled`` condition of one pod over its versions: ``(status, reason)`` per change."""
    steps: list[Step] = []
    for obj in versions:
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition["type"] == "PodScheduled":
                steps.append((condition["status"], condition.get("reason", "")))
    return _transitions(steps)


def rank(pod: dict[str, Any]) -> str:
    """A member's rank: the gang's rank label (pods the provider creates) or the Job's completion index (Kueue)."""
    labels = pod["metadata"].get("labels") or {}
    annotations = pod["metadata"].get("annotations") or {}
    return str(labels.get(naming.RANK_LABEL) or annotations.get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX))


def gate_and_binding_order(versions: Iterable[dict[str, Any]]) -> Sequence:
    """Over the versions of one member pod: ``created gated``, ``gate removed`` and ``bound`` events in
    order - ``(created gated, gate removed, bound)`` for a member released by removing its gate,
    ``(bound,)`` for one created without gates."""
    gated: bool | None = None
    bound = False
    events: list[Step] = []
    for obj in versions:
        has_gates = bool((obj.get("spec") or {}).get("schedulingGates"))
        if gated is None and has_gates:
            events.append(("created gated",))
        elif gated and not has_gates:
            events.append(("gate removed",))
        gated = has_gates
        if not bound and (obj.get("spec") or {}).get("nodeName"):
            bound = True
            events.append(("bound",))
    return tuple(events)


def creation_and_release(versions: Iterable[dict[str, Any]]) -> Sequence:
    """Over the pod versions of one gang in watch order: ``created gated``, ``created`` (without gates)
    and ``gate removed`` events, consecutive equal events once - ``(created gated, gate removed)`` for
    a gang whose every member existed before the first release, a longer sequence otherwise."""
    gated: dict[str, bool] = {}
    events: list[Step] = []
    for obj in versions:
        uid = obj["metadata"]["uid"]
        has_gates = bool((obj.get("spec") or {}).get("schedulingGates"))
        if uid not in gated:
            events.append(("created gated",) if has_gates else ("created",))
        elif gated[uid] and not has_gates:
            events.append(("gate removed",))
        gated[uid] = has_gates
    return _transitions(events)


def _gang_of(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    return str(labels.get(naming.GANG_LABEL) or pod["metadata"].get("generateName") or pod["metadata"]["name"])


def reduce(recorded: dict[str, list[dict[str, Any]]], *, since: float) -> dict[str, Sequence]:
    """Every comparable sequence of one scenario's recording, by a name stable across runs.

    ``recorded`` maps a store key (``"v1/pods"``, ``"autoscaling.x-k8s.io/v1/provisioningrequests"``,
    ``"kueue.x-k8s.io/v1beta2/workloads"``) to its versions, oldest first; a kind not recorded
    gives no sequence.
    """
    sequences: dict[str, Sequence] = {}
    kinds = (
        ("provisioningrequest", "autoscaling.x-k8s.io/v1/provisioningrequests", REQUEST_MILESTONES),
        ("workload", "kueue.x-k8s.io/v1beta2/workloads", WORKLOAD_MILESTONES),
        ("podgroup", "scheduling.k8s.io/v1beta1/podgroups", POD_GROUP_MILESTONES),
    )
    for role, store_key, milestones in kinds:
        for number, versions in enumerate(by_object(recorded.get(store_key, []), since=since), start=1):
            for kind, changes in condition_transitions(versions).items():
                sequences[f"{role} {number} {kind}"] = changes
            sequences[f"{role} {number} order"] = milestone_order(versions, milestones)
            for check, states in admission_check_states(versions).items():
                sequences[f"{role} {number} check {check}"] = states
    pods = by_object(recorded.get("v1/pods", []), since=since)
    gangs: dict[str, int] = {}
    for versions in pods:
        number = gangs.setdefault(_gang_of(versions[0]), len(gangs) + 1)
        member = f"gang {number} rank {rank(versions[0])}"
        sequences[f"{member} phases"] = phases(versions)
        sequences[f"{member} PodScheduled"] = pod_scheduled(versions)
        sequences[f"{member} gate and binding"] = gate_and_binding_order(versions)
    uids = {versions[0]["metadata"]["uid"] for versions in pods}
    for gang, number in gangs.items():
        members = [
            obj for obj in recorded.get("v1/pods", []) if obj["metadata"]["uid"] in uids and _gang_of(obj) == gang
        ]
        sequences[f"gang {number} creation and release"] = creation_and_release(members)
    return sequences


def differences(sim: dict[str, Sequence], real: dict[str, Sequence]) -> dict[str, tuple[Sequence, Sequence]]:
    """The sequences that differ, by name: ``(on gang-sim, on the real stack)``, ``()`` where one side has none."""
    return {
        name: (sim.get(name, ()), real.get(name, ()))
        for name in sorted(set(sim) | set(real))
        if sim.get(name, ()) != real.get(name, ())
    }
