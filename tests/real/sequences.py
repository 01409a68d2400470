"""Recorded versions reduced to sequences that two clusters running the same gang can be compared on.

Pure functions over what :class:`tests.real.recording.Recorder` keeps (every watched version of a
kind, oldest first). Each reduction drops what differs between any two runs of the same scenario -
names, uids, generated suffixes, timestamps, the number of writes that carried the same state - and
keeps what the provider reads:

- conditions of a ProvisioningRequest or a Workload: ``(type, status, reason)`` in the order they
  first appear, a condition repeated unchanged dropped (the meaning of each is in the autoscaler's
  ``proposals/provisioning-request.md`` and Kueue's ``apis/kueue/v1beta2/workload_types.go``);
- a Workload's admission-check states per check name (``Pending``, ``Ready``, ``Retry``,
  ``Rejected``; Kueue ``workload_types.go`` ``AdmissionCheckState``);
- a member pod's phases and its ``PodScheduled`` condition, per rank;
- per member, the order of its scheduling-gate removal and its binding (``spec.nodeName`` first set):
  KEP-3521 requires the gate gone before the scheduler binds; per gang, the same events of all
  members in watch order (whether every gate went before the first binding).

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


def _first_appearances(steps: Iterable[Step]) -> Sequence:
    seen: list[Step] = []
    for step in steps:
        if step not in seen:
            seen.append(step)
    return tuple(seen)


def _transitions(states: Iterable[Step]) -> Sequence:
    """``states`` with each run of equal consecutive states kept once."""
    kept: list[Step] = []
    for state in states:
        if not kept or kept[-1] != state:
            kept.append(state)
    return tuple(kept)


def condition_transitions(versions: Iterable[dict[str, Any]]) -> Sequence:
    """``(type, status, reason)`` of ``status.conditions`` over the versions of one object, in order of
    first appearance; a condition kept unchanged over several versions counts once."""
    return _first_appearances(
        (condition["type"], condition["status"], condition.get("reason", ""))
        for obj in versions
        for condition in (obj.get("status") or {}).get("conditions") or []
    )


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
    """Over the pod versions of one gang in watch order: ``created gated``, ``gate removed`` and ``bound``
    events, consecutive equal events once - ``(created gated, gate removed, bound)`` for a gang
    released together; interleaved removals and bindings show as a longer sequence."""
    gated: dict[str, bool] = {}
    bound: set[str] = set()
    events: list[Step] = []
    for obj in versions:
        uid = obj["metadata"]["uid"]
        has_gates = bool((obj.get("spec") or {}).get("schedulingGates"))
        if uid not in gated and has_gates:
            events.append(("created gated",))
        elif gated.get(uid) and not has_gates:
            events.append(("gate removed",))
        gated[uid] = has_gates
        if uid not in bound and (obj.get("spec") or {}).get("nodeName"):
            bound.add(uid)
            events.append(("bound",))
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
    requests = recorded.get("autoscaling.x-k8s.io/v1/provisioningrequests", [])
    for number, versions in enumerate(by_object(requests, since=since), start=1):
        sequences[f"provisioningrequest {number} conditions"] = condition_transitions(versions)
    workloads = recorded.get("kueue.x-k8s.io/v1beta2/workloads", [])
    for number, versions in enumerate(by_object(workloads, since=since), start=1):
        sequences[f"workload {number} conditions"] = condition_transitions(versions)
        for check, states in admission_check_states(versions).items():
            sequences[f"workload {number} check {check}"] = states
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
        sequences[f"gang {number} release order"] = gate_and_binding_order(members)
    return sequences


def differences(sim: dict[str, Sequence], real: dict[str, Sequence]) -> dict[str, tuple[Sequence, Sequence]]:
    """The sequences that differ, by name: ``(on gang-sim, on the real stack)``, ``()`` where one side has none."""
    return {
        name: (sim.get(name, ()), real.get(name, ()))
        for name in sorted(set(sim) | set(real))
        if sim.get(name, ()) != real.get(name, ())
    }
