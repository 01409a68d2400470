"""The simulated Job controller (``batch/v1``), following ``pkg/controller/job/job_controller.go``.

Per Job, one pass:

- **suspend**: while ``spec.suspend`` is true no pods are created and active pods are deleted;
  condition ``Suspended=True/JobSuspended`` ("Job suspended"). Resuming sets ``Suspended=False/
  JobResumed`` and a fresh ``status.startTime`` (Kueue clears it while suspended).
- **pods**: labels ``batch.kubernetes.io/controller-uid``, ``batch.kubernetes.io/job-name`` (and the
  legacy ``controller-uid``/``job-name``), a controller ownerReference to the Job. ``Indexed`` mode
  adds the completion index as annotation and label ``batch.kubernetes.io/job-completion-index``,
  env ``JOB_COMPLETION_INDEX`` (downward API from that annotation), hostname ``<job>-<index>`` and
  pod name ``<job>-<index>-<random>``; ``NonIndexed`` pods are named ``<job>-<random>``.
- **counts**: ``active`` (not terminal), ``ready``, ``succeeded``, ``failed``; Indexed jobs also
  report ``completedIndexes`` ("0-3,5"). Finished pods are remembered by uid, so deleting a
  finished pod does not lose its count (upstream uses the job-tracking finalizer for that).
- **creation**: up to ``parallelism`` active pods, and never more than the completions still needed.
- **finish**: ``succeeded >= completions`` (or, without completions, any success and no active pod)
  gives ``SuccessCriteriaMet`` then ``Complete`` with ``completionTime``; ``failed > backoffLimit``
  deletes active pods and gives ``FailureTarget`` then ``Failed``, reason ``BackoffLimitExceeded``,
  message "Job has reached the specified backoff limit" (the 1.31+ condition sequence).

A Job whose ``spec.managedBy`` names another controller is left alone (:func:`is_managed_here`).

Not modelled: pod failure policy, success policy, per-index backoff, pod replacement delay,
activeDeadlineSeconds, ttlSecondsAfterFinished, orphan adoption.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from gang_sim.controllers.base import (
    Controller,
    Obj,
    controlled_by,
    is_true,
    owner_reference,
    same_conditions,
    set_condition,
    wall_time,
)

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass
class Tally:
    """Finished pods the controller has counted for one Job (by pod uid)."""

    succeeded: dict[str, int | None] = field(default_factory=dict)  # uid -> completion index
    failed: set[str] = field(default_factory=set)


def format_indexes(indexes: set[int]) -> str:
    """``{0,1,2,3,5}`` -> ``"0-3,5"`` (the ``completedIndexes`` format)."""
    parts: list[str] = []
    ordered = sorted(indexes)
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        parts.append(str(ordered[start]) if start == end else f"{ordered[start]}-{ordered[end]}")
        start = end + 1
    return ",".join(parts)


def pod_index(pod: Obj) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_finished(job: Obj) -> bool:
    return is_true(job, "Complete") or is_true(job, "Failed")


def pod_manifest(job: Obj, index: int | None) -> Obj:
    """The pod the Job controller creates for ``job`` (``index`` for Indexed mode)."""
    metadata = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    pod_metadata = template.get("metadata") or {}
    labels = {
        **(pod_metadata.get("labels") or {}),
        CONTROLLER_UID: metadata["uid"],
        JOB_NAME: metadata["name"],
        "controller-uid": metadata["uid"],
        "job-name": metadata["name"],
    }
    annotations = dict(pod_metadata.get("annotations") or {})
    spec = template.get("spec") or {}
    if index is None:
        generate_name = f"{metadata['name']}-"
    else:
        generate_name = f"{metadata['name']}-{index}-"
        labels[COMPLETION_INDEX] = str(index)
        annotations[COMPLETION_INDEX] = str(index)
        spec.setdefault("hostname", f"{metadata['name']}-{index}")
        env_var = {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}},
        }
        for container in spec.get("containers") or []:
            env = container.setdefault("env", [])
            if not any(item.get("name") == "JOB_COMPLETION_INDEX" for item in env):
                env.append(env_var)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": generate_name,
            "namespace": metadata["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


JOB_CONTROLLER = "kubernetes.io/job-controller"
"""``spec.managedBy`` of the Jobs this controller runs (absent means the same)."""


def is_managed_here(job: Obj) -> bool:
    """Whether the built-in controller runs ``job``: ``spec.managedBy`` unset or
    ``kubernetes.io/job-controller`` (the ``JobManagedBy`` feature, GA in v1.35; a Job of a Kueue
    MultiKueue manager is ``kueue.x-k8s.io/multikueue``'s, and its status is written by MultiKueue)."""
    managed_by = (job.get("spec") or {}).get("managedBy")
    return managed_by in (None, "", JOB_CONTROLLER)


class JobController(Controller):
    component = "job-controller"
    watches = frozenset({"batch/v1/jobs", "v1/pods"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tallies: dict[str, Tally] = {}

    def reconcile(self, now: float) -> float | None:
        jobs, _ = self.store.list("batch/v1/jobs")
        pods = self.store.view("v1/pods")
        for job in jobs:
            with self.guard(job):
                owned = [pod for pod in pods if controlled_by(pod, job)]
                self._sync(job, owned)
        live = {job["metadata"]["uid"] for job in jobs}
        for uid in set(self.tallies) - live:
            del self.tallies[uid]
        return None

    def _sync(self, job: Obj, pods: list[Obj]) -> None:
        if job["metadata"].get("deletionTimestamp") or not is_managed_here(job):
            return
        spec = job.get("spec") or {}
        status = dict(job.get("status") or {})
        tally = self.tallies.setdefault(job["metadata"]["uid"], Tally())
        indexed = spec.get("completionMode") == "Indexed"
        active: list[Obj] = []
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            uid = pod["metadata"]["uid"]
            if phase == "Succeeded":
                tally.succeeded.setdefault(uid, pod_index(pod))
            elif phase == "Failed":
                tally.failed.add(uid)
            elif not pod["metadata"].get("deletionTimestamp"):
                active.append(pod)
        succeeded_indexes = {index for index in tally.succeeded.values() if index is not None}
        succeeded = len(succeeded_indexes) if indexed else len(tally.succeeded)
        failed = len(tally.failed)
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        backoff_limit = int(spec.get("backoffLimit", 6))
        conditions = list(status.get("conditions") or [])
        suspended = bool(spec.get("suspend"))

        if is_finished(job):
            return
        if suspended:
            self._delete_pods(active)
            active = []
            if not is_true(job, "Suspended"):
                conditions = set_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended")
                self.plane.record_event(job, "Suspended", "Job suspended", component=self.component)
        else:
            if is_true(job, "Suspended"):
                conditions = set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed")
                status["startTime"] = wall_time()
                self.plane.record_event(job, "Resumed", "Job resumed", component=self.component)
            status.setdefault("startTime", wall_time())
            if failed > backoff_limit:
                self._delete_pods(active)
                active = []
                message = "Job has reached the specified backoff limit"
                conditions = set_condition(conditions, "FailureTarget", "True", "BackoffLimitExceeded", message)
                conditions = set_condition(conditions, "Failed", "True", "BackoffLimitExceeded", message)
                self.plane.record_event(job, "BackoffLimitExceeded", message, warning=True, component=self.component)
            elif self._complete(succeeded, completions, active):
                message = "Reached expected number of succeeded pods"
                conditions = set_condition(conditions, "SuccessCriteriaMet", "True", "CompletionsReached", message)
                conditions = set_condition(conditions, "Complete", "True", "CompletionsReached", message)
                status["completionTime"] = wall_time()
                self.plane.record_event(job, "Completed", "Job completed", component=self.component)
            else:
                active += self._create_pods(
                    job, active, succeeded_indexes, succeeded, parallelism, completions, indexed
                )
        status.update(
            {
                "active": len(active),
                "ready": sum(1 for pod in active if is_true(pod, "Ready")),
                "succeeded": succeeded,
                "failed": failed,
                "conditions": conditions,
            }
        )
        if indexed:
            status["completedIndexes"] = format_indexes(succeeded_indexes)
        if not suspended:
            status.pop("terminating", None)
        old = job.get("status") or {}
        if (
            same_conditions(old.get("conditions") or [], conditions)
            and all(
                old.get(key) == status.get(key)
                for key in ("active", "ready", "succeeded", "failed", "completedIndexes")
            )
            and old.get("startTime") == status.get("startTime")
        ):
            return
        if not conditions:
            status.pop("conditions")
        metadata = job["metadata"]
        self.store.patch(
            "batch/v1/jobs", metadata["name"], {"status": status}, namespace=metadata["namespace"], subresource="status"
        )

    @staticmethod
    def _complete(succeeded: int, completions: Any, active: list[Obj]) -> bool:
        if completions is None:
            return succeeded > 0 and not active
        return succeeded >= int(completions)

    def _create_pods(
        self,
        job: Obj,
        active: list[Obj],
        succeeded_indexes: set[int],
        succeeded: int,
        parallelism: int,
        completions: Any,
        indexed: bool,
    ) -> list[Obj]:
        wanted = parallelism
        if completions is not None:
            wanted = min(parallelism, int(completions) - succeeded)
        missing = wanted - len(active)
        if missing <= 0:
            return []
        indexes: list[int] | list[None]
        if indexed:
            total = int(completions) if completions is not None else parallelism
            busy = {pod_index(pod) for pod in active} | succeeded_indexes
            indexes = [index for index in range(total) if index not in busy][:missing]
        else:
            indexes = [None] * missing
        created: list[Obj] = []
        for index in indexes:
            pod = self.store.create("v1/pods", pod_manifest(job, index), job["metadata"]["namespace"])
            created.append(pod)
            self.plane.record_event(
                job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}", component=self.component
            )
        return created

    def _delete_pods(self, pods: list[Obj]) -> None:
        for pod in pods:
            metadata = pod["metadata"]
            self.store.delete("v1/pods", metadata["name"], metadata["namespace"])
