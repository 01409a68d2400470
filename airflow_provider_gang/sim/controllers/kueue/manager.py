"""The simulated Kueue controller manager: Workloads, quota reservation, admission, eviction, finish.

Per pass (reference 2.5-2.9, state machines 7.C-7.E):

- **integrations**: a Job labelled ``kueue.x-k8s.io/queue-name`` gets its Workload (event
  ``CreatedWorkload``); a plain pod group gets its Workload once ``pod-group-total-count`` pods exist
  (event "'<group>' group has fewer runnable pods than expected" until then).
- **reservation** in creation order within each ClusterQueue (BestEffortFIFO): LocalQueue and
  ClusterQueue must exist (else ``QuotaReserved=False/Inadmissible``); flavors are assigned by
  :mod:`.quota` with cohort borrowing and partial admission; a miss leaves ``QuotaReserved=False`` with
  :mod:`.pending`'s ``WaitingForQuota``/``ExceedsMaxQuota`` and message. Success writes
  ``status.admission``, ``QuotaReserved=True`` and the ClusterQueue's admission checks as ``Pending``.
- **checks**: ProvisioningRequest checks run in :mod:`.checks`. Any ``Retry`` evicts
  (``Evicted=True/AdmissionCheck``, quota released, requests deleted, ``Requeued=False`` until
  ``requeueAfterSeconds`` pass, then ``Requeued=True/BackoffFinished``); any ``Rejected`` deactivates
  (``DeactivationTarget``, ``spec.active=false``, ``Evicted=True/Deactivated``); check states always
  outrank ``Admitted``: a check turning Rejected or Retry sets ``Admitted=False`` in the same write
  (Kueue 0.19.3, #14871).
- **admission**: all checks Ready -> ``Admitted=True``; the Job's template gets flavor node labels,
  tolerations and ``podSetUpdates`` and is unsuspended (``parallelism`` set for partial admission); pod
  groups get their gate removed.
- **waitForPodsReady**: ``PodsReady`` tracks ready + succeeded pods >= count; without it
  ``waitForPodsReadyTimeoutSeconds`` after admission the workload is evicted with ``PodsReadyTimeout``,
  ``requeueState.count`` grows and it waits ``requeueBase * 2^(n-1)`` (capped); past ``requeueLimit``
  it is deactivated with ``RequeuingLimitExceeded``.
- **finish**: Job ``Complete``/``Failed`` or every group pod Succeeded -> ``Finished=True``, quota freed.

Not modelled: preemption, fair sharing, TAS, priorities, StrictFIFO blocking, MultiKueue.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow_provider_gang.sim.apiserver.errors import ApiError
from airflow_provider_gang.sim.controllers.base import Controller, Obj, condition, earliest, is_true, set_condition
from airflow_provider_gang.sim.controllers.kueue import checks, pending, queues, quota
from airflow_provider_gang.sim.controllers.kueue import workloads as wl
from airflow_provider_gang.sim.controllers.kueue.starter import OwnerControl
from airflow_provider_gang.sim.world.resources import format_quantity

_UNSATISFIED = "The workload has not all admission checks ready"


def _wall_in(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


class KueueManager(Controller):
    component = "kueue-controller-manager"
    watches = frozenset(
        {
            "batch/v1/jobs",
            "v1/pods",
            wl.WORKLOADS,
            "autoscaling.x-k8s.io/v1/provisioningrequests",
            *wl.RESOURCES.values(),
        }
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = self.plane.scenario.kueue
        self.requeue_at: dict[str, float] = {}
        self.admitted_at: dict[str, float] = {}
        self.owners = OwnerControl(self)

    def _list(self, key: str) -> dict[str, Obj]:
        items, _ = self.store.list(wl.RESOURCES[key])
        return {item["metadata"]["name"]: item for item in items}

    def reconcile(self, now: float) -> float | None:
        try:
            self.store.resolve(wl.WORKLOADS)
        except ApiError as error:
            if error.code == 404:  # the Kueue CRDs are not installed: nothing to manage
                return None
            raise
        self.flavors, self.cqs, self.acs, self.prcs = (self._list(k) for k in ("flavors", "cqs", "acs", "prcs"))
        self.lqs = {
            (item["metadata"]["namespace"], item["metadata"]["name"]): item
            for item in self.store.list(wl.RESOURCES["lqs"])[0]
        }
        queues.mark_checks_active(self)
        self.owners.create_workloads()
        workloads, _ = self.store.list(wl.WORKLOADS)
        self.usage: quota.Usage = {}
        for workload in workloads:
            admission = (workload.get("status") or {}).get("admission")
            if admission and is_true(workload, "QuotaReserved") and not is_true(workload, "Finished"):
                quota.add_usage(self.usage, admission["clusterQueue"], admission.get("podSetAssignments") or [])
        wake: float | None = None
        ordered = sorted(
            workloads, key=lambda item: (item["metadata"].get("creationTimestamp", ""), item["metadata"]["name"])
        )
        for workload in ordered:
            with self.guard(workload):
                wake = earliest(wake, self._sync(workload, now))
        queues.report(self)
        finished_groups = {
            (item["metadata"]["namespace"], item["metadata"]["name"])
            for item in self.store.list(wl.WORKLOADS)[0]
            if is_true(item, "Finished") and (item["metadata"].get("annotations") or {}).get(wl.IS_GROUP) == "true"
        }
        self.owners.release_finalizers(finished_groups)
        return wake

    # -- per workload --------------------------------------------------------------------------------

    def _sync(self, workload: Obj, now: float) -> float | None:
        uid = workload["metadata"]["uid"]
        status = workload.get("status") or {}
        if is_true(workload, "Finished") or workload["metadata"].get("deletionTimestamp"):
            return None
        finished = self.owners.finished(workload)
        if finished is not None:
            self._write(workload, conditions=[("Finished", "True", finished[0], finished[1])])
            return None
        if (workload.get("spec") or {}).get("active") is False:
            if is_true(workload, "QuotaReserved"):
                self._evict(workload, "Deactivated", "The workload is deactivated", requeue_after=None, now=now)
            return None
        if not is_true(workload, "QuotaReserved"):
            if self.requeue_at.get(uid, 0.0) > now:
                return self.requeue_at[uid]
            evicted = condition(workload, "Evicted") or {}
            if evicted.get("status") == "True" and evicted.get("reason") == "Deactivated":
                if (condition(workload, "Requeued") or {}).get("reason") != "Reactivated":
                    self._write(
                        workload,
                        conditions=[
                            ("Requeued", "True", "Reactivated", "The workload was reactivated"),
                            ("DeactivationTarget", "False", "Reactivated", "The workload was reactivated"),
                        ],
                    )
                    return None
            elif is_true(workload, "Evicted") and (condition(workload, "Requeued") or {}).get("status") == "False":
                self._write(
                    workload, conditions=[("Requeued", "True", "BackoffFinished", "The workload backoff was finished")]
                )
                return None
            self._reserve(workload)
            return None
        check_states = self._run_checks(workload, now)
        if any(item["state"] == "Rejected" for item in check_states):
            message = "At least one admission check is rejected"
            self._deactivate(workload, "AdmissionCheck", message)
            self.plane.record_event(workload, "AdmissionCheckRejected", message, warning=True, component=self.component)
            return None
        retry = [item for item in check_states if item["state"] == "Retry"]
        if retry:
            delay = float(max(item.get("requeueAfterSeconds", 0) for item in retry))
            self._evict(
                workload, "AdmissionCheck", "At least one admission check is false", requeue_after=delay, now=now
            )
            return now + delay
        if check_states and not all(item["state"] == "Ready" for item in check_states):
            return None
        if not is_true(workload, "Admitted"):
            self._write(workload, conditions=[("Admitted", "True", "Admitted", "The workload is admitted")])
            self.admitted_at[uid] = now
            self.plane.record_event(
                workload,
                "Admitted",
                f"Admitted by ClusterQueue {status['admission']['clusterQueue']}",
                component=self.component,
            )
            workload = self.store.get(wl.WORKLOADS, workload["metadata"]["name"], workload["metadata"]["namespace"])
        self.owners.start(workload)
        return self._wait_for_pods_ready(workload, now)

    def _reserve(self, workload: Obj) -> None:
        namespace = workload["metadata"]["namespace"]
        queue_name = (workload.get("spec") or {}).get("queueName", "")
        local_queue = self.lqs.get((namespace, queue_name))
        if local_queue is None:
            self._pending(workload, "Inadmissible", f"LocalQueue {queue_name} doesn't exist")
            return
        cq_name = (local_queue.get("spec") or {}).get("clusterQueue", "")
        cluster_queue = self.cqs.get(cq_name)
        if cluster_queue is None:
            self._pending(workload, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
            return
        namespace_labels = (self.store.get("v1/namespaces", namespace).get("metadata") or {}).get("labels") or {}
        if not queues.namespace_selected(cluster_queue, namespace_labels):
            self._pending(workload, "Inadmissible", f"Workload namespace doesn't match ClusterQueue selector {cq_name}")
            return
        check_names = queues.admission_check_names(cluster_queue)
        missing = [name for name in check_names if name not in self.acs]
        if missing:
            self._pending(
                workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive: admission check {missing[0]} not found"
            )
            return
        cohort_name = queues.cohort_of(cluster_queue)
        cohort = [item for item in self.cqs.values() if cohort_name and queues.cohort_of(item) == cohort_name]
        requests = [
            quota.PodSetRequest(
                item["name"],
                int(item.get("count", 1)),
                (item.get("template") or {}).get("spec") or {},
                item.get("minCount"),
            )
            for item in (workload.get("spec") or {}).get("podSets") or []
        ]
        members = cohort or [cluster_queue]
        assignments = quota.assign(requests, cluster_queue, members, self.flavors, self.usage)
        if assignments is None:
            self._pending(
                workload, *pending.reason_and_message(requests, cluster_queue, members, self.flavors, self.usage)
            )
            return
        admission = {
            "clusterQueue": cq_name,
            "podSetAssignments": [
                {
                    "name": item.name,
                    "count": item.count,
                    "flavors": item.flavors,
                    "resourceUsage": {resource: format_quantity(amount) for resource, amount in item.usage.items()},
                }
                for item in assignments
            ],
        }
        quota.add_usage(self.usage, cq_name, admission["podSetAssignments"])
        previous = {item["name"]: item for item in (workload.get("status") or {}).get("admissionChecks") or []}
        check_entries = [
            {
                "name": name,
                "state": "Pending",
                "message": "",
                "lastTransitionTime": _wall_in(0),
                **({"retryCount": previous[name]["retryCount"]} if previous.get(name, {}).get("retryCount") else {}),
            }
            for name in check_names
        ]
        updates = [("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}")]
        if is_true(workload, "Evicted"):
            updates.append(("Evicted", "False", "QuotaReserved", "Previously: evicted"))
        if check_names:
            updates.append(("Admitted", "False", "UnsatisfiedAdmissionChecks", _UNSATISFIED))
        else:
            updates.append(("Admitted", "True", "Admitted", "The workload is admitted"))
            self.admitted_at[workload["metadata"]["uid"]] = self.plane.clock.now()
        self._write(workload, conditions=updates, admission=admission, admission_checks=check_entries)
        self.plane.record_event(
            workload, "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}", component=self.component
        )

    def _pending(self, workload: Obj, reason: str, message: str) -> None:
        current = condition(workload, "QuotaReserved")
        if current is None or (current.get("reason"), current.get("message")) != (reason, message):
            self._write(workload, conditions=[("QuotaReserved", "False", reason, message)])

    def _run_checks(self, workload: Obj, now: float) -> list[dict[str, Any]]:
        status = workload.get("status") or {}
        entries = list(status.get("admissionChecks") or [])
        admitted = is_true(workload, "Admitted")
        changed = False
        for index, entry in enumerate(entries):
            check = self.acs.get(entry["name"])
            if check is None or (check.get("spec") or {}).get("controllerName") != checks.PROVISIONING_CONTROLLER:
                continue
            if entry["state"] in ("Retry", "Rejected"):
                continue
            config = self.prcs.get(((check.get("spec") or {}).get("parameters") or {}).get("name", ""))
            if config is None:
                continue
            state = self.owners.provisioning_state(workload, entry, config)
            new = {**{k: v for k, v in entry.items() if k not in ("podSetUpdates", "requeueAfterSeconds")}, **state}
            if entry["state"] == "Ready" and admitted and state["state"] == "Pending":
                continue  # BookingExpired after admission is ignored
            if {k: v for k, v in new.items() if k != "lastTransitionTime"} != {
                k: v for k, v in entry.items() if k != "lastTransitionTime"
            }:
                if new["state"] != entry["state"]:
                    new["lastTransitionTime"] = _wall_in(0)
                entries[index] = new
                changed = True
        if changed:
            # check states outrank Admitted in the same write (Kueue <= 0.19.2 left it True: #14871, 0.19.3)
            failing = admitted and any(entry["state"] in ("Rejected", "Retry") for entry in entries)
            unadmitted = [("Admitted", "False", "UnsatisfiedAdmissionChecks", _UNSATISFIED)] if failing else []
            self._write(workload, conditions=unadmitted, admission_checks=entries)
        return entries

    def _wait_for_pods_ready(self, workload: Obj, now: float) -> float | None:
        uid = workload["metadata"]["uid"]
        ready, total = self.owners.ready_pods(workload)
        if ready >= total:
            if not is_true(workload, "PodsReady"):
                started = ("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")
                self._write(workload, conditions=[started])
            return None
        current = condition(workload, "PodsReady")
        if (current is None or current.get("reason") != "WaitForStart") and not is_true(workload, "PodsReady"):
            self._write(
                workload, conditions=[("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")]
            )
        if is_true(workload, "PodsReady"):
            return None
        deadline = self.admitted_at.setdefault(uid, now) + self.settings.wait_for_pods_ready_timeout_seconds
        if now < deadline:
            return deadline
        count = int(((workload.get("status") or {}).get("requeueState") or {}).get("count", 0)) + 1
        limit = self.settings.requeue_limit
        if limit is not None and count > limit:
            self._deactivate(workload, "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries")
            return None
        delay = min(self.settings.requeue_max_seconds, self.settings.requeue_base_seconds * 2 ** (count - 1))
        self._evict(
            workload,
            "PodsReadyTimeout",
            f"Exceeded the PodsReady timeout {workload['metadata']['namespace']}/{workload['metadata']['name']}",
            requeue_after=delay,
            now=now,
            requeue_count=count,
        )
        return float(now + delay)

    def _deactivate(self, workload: Obj, reason: str, message: str) -> None:
        """``DeactivationTarget=True/<reason>``, then ``spec.active=false``."""
        self._write(workload, conditions=[("DeactivationTarget", "True", reason, message)])
        metadata = workload["metadata"]
        self.store.patch(wl.WORKLOADS, metadata["name"], {"spec": {"active": False}}, namespace=metadata["namespace"])

    def _evict(
        self,
        workload: Obj,
        reason: str,
        message: str,
        *,
        requeue_after: float | None,
        now: float,
        requeue_count: int | None = None,
    ) -> None:
        uid = workload["metadata"]["uid"]
        self.owners.stop(workload, reason)
        self.owners.delete_requests(workload)
        self.admitted_at.pop(uid, None)
        updates = [
            ("Evicted", "True", reason, message),
            ("QuotaReserved", "False", reason, message),
            ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ]
        if condition(workload, "PodsReady") is not None:
            updates.append(("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded"))
        requeue_state: dict[str, Any] | None = None
        if requeue_after is not None:
            self.requeue_at[uid] = now + requeue_after
            updates.append(("Requeued", "False", reason, message))
            state: dict[str, Any] = {"requeueAt": _wall_in(requeue_after)}
            if requeue_count is not None:
                state["count"] = requeue_count
            elif ((workload.get("status") or {}).get("requeueState") or {}).get("count"):
                state["count"] = workload["status"]["requeueState"]["count"]
            requeue_state = state
        entries = [
            {
                **{k: v for k, v in item.items() if k != "podSetUpdates"},
                "state": "Pending" if item["state"] != "Rejected" else "Rejected",
            }
            for item in (workload.get("status") or {}).get("admissionChecks") or []
        ]
        self._write(workload, conditions=updates, admission=None, admission_checks=entries, requeue_state=requeue_state)
        self.plane.record_event(workload, "EvictedDueTo" + reason, message, warning=True, component=self.component)

    def _write(self, workload: Obj, *, conditions: Sequence[tuple[str, str, str, str]] = (), **fields: Any) -> None:
        metadata = workload["metadata"]
        status = workload.setdefault("status", {})
        current = list(status.get("conditions") or [])
        generation = {"observedGeneration": int(metadata.get("generation", 1))}
        for kind, value, reason, message in conditions:
            current = set_condition(current, kind, value, reason, message, extra=generation)
        patch: dict[str, Any] = {"conditions": current}
        names = {"admission": "admission", "admission_checks": "admissionChecks", "requeue_state": "requeueState"}
        for key, value in fields.items():
            if key == "requeue_state" and value is None:
                continue
            patch[names[key]] = value
        updated = self.store.patch(
            wl.WORKLOADS, metadata["name"], {"status": patch}, namespace=metadata["namespace"], subresource="status"
        )
        workload["status"] = updated.get("status") or {}


def kueue_controllers() -> list[type[Controller]]:
    return [KueueManager]
