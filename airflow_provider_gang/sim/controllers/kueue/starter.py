"""What Kueue does to the objects a Workload stands for: Jobs and plain pod groups (reference 2.7, 2.8).

:class:`OwnerControl` creates Workloads for new Jobs and complete pod groups, starts admitted owners and
stops evicted ones, and reports readiness and completion:

- start a Job: its template gets the flavor's node labels and tolerations and the checks'
  ``podSetUpdates``; partial admission sets ``parallelism`` (and ``completions`` too when the Job is
  annotated ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``); then ``suspend=false``;
- start a pod group: the same merged into each pod, then the ``kueue.x-k8s.io/admission`` gate removed;
- stop a Job: ``suspend=true``, template, parallelism (and completions) restored, ``status.startTime``
  cleared; stop a pod group: its pods are deleted.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from airflow_provider_gang.sim.apiserver.errors import ApiError
from airflow_provider_gang.sim.controllers.autoscaler import provisioning as pr
from airflow_provider_gang.sim.controllers.base import Obj, controlled_by, is_true, owner_reference
from airflow_provider_gang.sim.controllers.kueue import checks
from airflow_provider_gang.sim.controllers.kueue import workloads as wl

if TYPE_CHECKING:
    from airflow_provider_gang.sim.controllers.kueue.manager import KueueManager


def merge_pod_spec(spec: dict[str, Any], flavor: Obj | None, update: Obj | None) -> dict[str, Any]:
    merged = copy.deepcopy(spec)
    selector = dict(merged.get("nodeSelector") or {})
    tolerations = list(merged.get("tolerations") or [])
    if flavor is not None:
        selector.update((flavor.get("spec") or {}).get("nodeLabels") or {})
        tolerations += [item for item in (flavor.get("spec") or {}).get("tolerations") or [] if item not in tolerations]
    if update is not None:
        selector.update(update.get("nodeSelector") or {})
        tolerations += [item for item in update.get("tolerations") or [] if item not in tolerations]
    if selector:
        merged["nodeSelector"] = selector
    if tolerations:
        merged["tolerations"] = tolerations
    return merged


class OwnerControl:
    def __init__(self, manager: KueueManager) -> None:
        self.manager = manager
        self.store = manager.store
        self.plane = manager.plane
        self.reported_groups: set[tuple[str, str, int]] = set()

    # -- pod finalizers ----------------------------------------------------------------------------

    def release_finalizers(self, finished_groups: set[tuple[str, str]]) -> None:
        """Drop ``kueue.x-k8s.io/managed`` from pods being deleted, or terminal once their group finished."""
        for pod in self.store.view("v1/pods"):
            metadata = pod["metadata"]
            finalizers = metadata.get("finalizers") or []
            if wl.MANAGED not in finalizers:
                continue
            group_name = (metadata.get("labels") or {}).get(wl.GROUP_NAME)
            terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            finished = group_name is None or (metadata["namespace"], group_name) in finished_groups
            if metadata.get("deletionTimestamp") or (terminal and finished):
                with self.manager.guard(pod):
                    remaining = [name for name in finalizers if name != wl.MANAGED]
                    patch = {
                        "metadata": {"finalizers": remaining or None, "resourceVersion": metadata["resourceVersion"]}
                    }
                    self.store.patch("v1/pods", metadata["name"], patch, namespace=metadata["namespace"])

    # -- workloads for new owners -------------------------------------------------------------------

    def create_workloads(self) -> None:
        existing, _ = self.store.list(wl.WORKLOADS)
        by_job_uid = {(item["metadata"].get("labels") or {}).get(wl.JOB_UID) for item in existing}
        by_name = {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in existing}
        for job in self.store.list("batch/v1/jobs")[0]:
            labels = job["metadata"].get("labels") or {}
            if not labels.get(wl.QUEUE_NAME) or job["metadata"]["uid"] in by_job_uid:
                continue
            if is_true(job, "Complete") or is_true(job, "Failed"):
                continue
            with self.manager.guard(job):
                created = self.store.create(wl.WORKLOADS, wl.job_workload(job), job["metadata"]["namespace"])
                self.plane.record_event(
                    job,
                    "CreatedWorkload",
                    f"Created Workload: {job['metadata']['namespace']}/{created['metadata']['name']}",
                    component=self.manager.component,
                )
        groups: dict[tuple[str, str], list[Obj]] = {}
        for pod in self.store.view("v1/pods"):
            labels = pod["metadata"].get("labels") or {}
            if labels.get(wl.QUEUE_NAME) and labels.get(wl.GROUP_NAME) and not pod["metadata"].get("deletionTimestamp"):
                groups.setdefault((pod["metadata"]["namespace"], labels[wl.GROUP_NAME]), []).append(pod)
        for (namespace, group), pods in groups.items():
            if (namespace, group) in by_name:
                continue
            with self.manager.guard(pods[0]):
                self._create_group_workload(namespace, group, pods)
        for pod in self.store.view("v1/pods"):
            metadata = pod["metadata"]
            labels = metadata.get("labels") or {}
            if not labels.get(wl.QUEUE_NAME) or labels.get(wl.GROUP_NAME) or metadata["uid"] in by_job_uid:
                continue
            if metadata.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            with self.manager.guard(pod):
                self.store.create(wl.WORKLOADS, wl.pod_workload(pod), metadata["namespace"])

    def _create_group_workload(self, namespace: str, group: str, pods: list[Obj]) -> None:
        total = int((pods[0]["metadata"].get("annotations") or {}).get(wl.GROUP_TOTAL, "1"))
        runnable = [pod for pod in pods if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        if len(runnable) < total:
            key = (namespace, group, len(runnable))
            if key not in self.reported_groups:
                self.reported_groups.add(key)
                self.plane.record_event(
                    pods[0],
                    "ErrWorkloadCompose",
                    f"'{group}' group has fewer runnable pods than expected",
                    warning=True,
                    component=self.manager.component,
                )
            return
        members = sorted(runnable, key=lambda pod: pod["metadata"]["name"])[:total]
        workload = self.store.create(wl.WORKLOADS, wl.group_workload(group, namespace, members), namespace)
        for pod in members:
            references = [
                *list(pod["metadata"].get("ownerReferences") or []),
                owner_reference(workload, controller=False),
            ]
            patch = {"metadata": {"ownerReferences": references}}
            self.store.patch("v1/pods", pod["metadata"]["name"], patch, namespace=namespace)

    # -- owners of a workload -----------------------------------------------------------------------

    def _job(self, workload: Obj) -> Obj | None:
        for reference in workload["metadata"].get("ownerReferences") or []:
            if reference.get("kind") == "Job":
                try:
                    return self.store.get("batch/v1/jobs", reference["name"], workload["metadata"]["namespace"])
                except ApiError:
                    return None
        return None

    def _group_pods(self, workload: Obj) -> list[Obj]:
        """The pods a pod-group or single-pod Workload stands for."""
        namespace = workload["metadata"]["namespace"]
        if (workload["metadata"].get("annotations") or {}).get(wl.IS_GROUP) == "true":
            pods, _ = self.store.list(
                "v1/pods", namespace, label_selector=f"{wl.GROUP_NAME}={workload['metadata']['name']}"
            )
            return pods
        for reference in workload["metadata"].get("ownerReferences") or []:
            if reference.get("kind") == "Pod":
                try:
                    return [self.store.get("v1/pods", reference["name"], namespace)]
                except ApiError:
                    return []
        return []

    def _is_group(self, workload: Obj) -> bool:
        """A Workload of plain pods (a group, or a single pod) rather than of a Job."""
        annotations = workload["metadata"].get("annotations") or {}
        owners = workload["metadata"].get("ownerReferences") or []
        return annotations.get(wl.IS_GROUP) == "true" or any(ref.get("kind") == "Pod" for ref in owners)

    def finished(self, workload: Obj) -> tuple[str, str] | None:
        if self._is_group(workload):
            pods = self._group_pods(workload)
            total = sum(int(item.get("count", 1)) for item in workload["spec"]["podSets"])
            phases = [(pod.get("status") or {}).get("phase") for pod in pods]
            if phases.count("Succeeded") >= total:
                return ("Succeeded", "Pods succeeded")
            single = (workload["metadata"].get("annotations") or {}).get(wl.IS_GROUP) != "true"
            return ("Failed", "Pod failed") if single and "Failed" in phases else None
        job = self._job(workload)
        if job is None:
            return None
        if is_true(job, "Complete"):
            return ("Succeeded", "Job finished successfully")
        if is_true(job, "Failed"):
            return ("Failed", "Job failed")
        return None

    def ready_pods(self, workload: Obj) -> tuple[int, int]:
        total = sum(
            int(item.get("count", 1))
            for item in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        )
        if self._is_group(workload):
            pods = self._group_pods(workload)
            ready = sum(
                1 for pod in pods if is_true(pod, "Ready") or (pod.get("status") or {}).get("phase") == "Succeeded"
            )
            return ready, total
        job = self._job(workload)
        status = (job or {}).get("status") or {}
        return int(status.get("ready", 0)) + int(status.get("succeeded", 0)), total

    def _assignment(self, workload: Obj, pod_set: str) -> Obj:
        for item in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            if item["name"] == pod_set:
                return dict(item)
        return {}

    def _flavor(self, assignment: Obj) -> Obj | None:
        names = set((assignment.get("flavors") or {}).values())
        return self.manager.flavors.get(sorted(names)[0]) if names else None

    def _update(self, workload: Obj, pod_set: str) -> Obj:
        annotations: dict[str, str] = {}
        merged: dict[str, Any] = {}
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            for update in entry.get("podSetUpdates") or []:
                if update.get("name") == pod_set:
                    annotations.update(update.get("annotations") or {})
                    merged.setdefault("nodeSelector", {}).update(update.get("nodeSelector") or {})
                    merged.setdefault("tolerations", []).extend(update.get("tolerations") or [])
                    merged.setdefault("labels", {}).update(update.get("labels") or {})
        merged["annotations"] = annotations
        return merged

    def start(self, workload: Obj) -> None:
        """Run the admitted owner (idempotent)."""
        pod_set = workload["spec"]["podSets"][0]
        assignment = self._assignment(workload, pod_set["name"])
        flavor = self._flavor(assignment)
        update = self._update(workload, pod_set["name"])
        if self._is_group(workload):
            for pod in self._group_pods(workload):
                gates = (pod.get("spec") or {}).get("schedulingGates") or []
                if not any(gate.get("name") == wl.ADMISSION_GATE for gate in gates):
                    continue
                spec = merge_pod_spec(pod["spec"], flavor, update)
                patch: dict[str, Any] = {
                    "metadata": {"annotations": update["annotations"], "labels": update.get("labels") or {}},
                    "spec": {
                        "schedulingGates": [gate for gate in gates if gate.get("name") != wl.ADMISSION_GATE],
                        **{key: spec[key] for key in ("nodeSelector", "tolerations") if key in spec},
                    },
                }
                self.store.patch(
                    "v1/pods",
                    pod["metadata"]["name"],
                    patch,
                    namespace=pod["metadata"]["namespace"],
                    patch_type="merge",
                )
            return
        job = self._job(workload)
        if job is None or not (job.get("spec") or {}).get("suspend"):
            return
        template = copy.deepcopy(pod_set.get("template") or {})
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(update["annotations"])
        template["metadata"].setdefault("labels", {}).update(update.get("labels") or {})
        template["spec"] = merge_pod_spec(template.get("spec") or {}, flavor, update)
        template["metadata"]["labels"].update(
            ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        )
        spec_patch: dict[str, Any] = {"suspend": False, "template": template}
        count = int(assignment.get("count", pod_set.get("count", 1)))
        if count != int(pod_set.get("count", 1)):
            spec_patch["parallelism"] = count
            if _completions_follow_parallelism(job):
                spec_patch["completions"] = count
        self.store.patch(
            "batch/v1/jobs", job["metadata"]["name"], {"spec": spec_patch}, namespace=job["metadata"]["namespace"]
        )

    def stop(self, workload: Obj, reason: str) -> None:
        """Stop an evicted owner: suspend the Job (restoring its template) or delete the group's pods."""
        if self._is_group(workload):
            for pod in self._group_pods(workload):
                self.store.delete("v1/pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
            return
        job = self._job(workload)
        if job is None:
            return
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        self.store.patch("batch/v1/jobs", name, {"spec": {"suspend": True}}, namespace=namespace)
        pod_set = workload["spec"]["podSets"][0]
        template = copy.deepcopy(pod_set.get("template") or {})
        template.setdefault("metadata", {}).setdefault("labels", {}).update(
            ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        )
        restored: dict[str, Any] = {"template": template, "parallelism": int(pod_set.get("count", 1))}
        if _completions_follow_parallelism(job):
            restored["completions"] = restored["parallelism"]
        self.store.patch("batch/v1/jobs", name, {"spec": restored}, namespace=namespace)
        self.store.patch(
            "batch/v1/jobs", name, {"status": {"startTime": None}}, namespace=namespace, subresource="status"
        )

    # -- provisioning requests ----------------------------------------------------------------------

    def provisioning_state(self, workload: Obj, entry: Obj, config: Obj) -> dict[str, Any]:
        attempt = int(entry.get("retryCount", 0)) + 1
        name = checks.request_name(workload["metadata"]["name"], entry["name"], attempt)
        namespace = workload["metadata"]["namespace"]
        managed = set((config.get("spec") or {}).get("managedResources") or [])
        pod_sets = workload["spec"]["podSets"]
        if managed:
            wanted = [item for item in pod_sets if managed & set(_requested_resources(item))]
            if not wanted:
                return {"state": "Ready", "message": "the provisioning request is not needed"}
            pod_sets = wanted
        try:
            request: Obj | None = self.store.get(pr.PROVISIONING_REQUESTS, name, namespace)
        except ApiError:
            request = None
        if request is None:
            counts = {}
            for item in pod_sets:
                assignment = self._assignment(workload, item["name"])
                template = checks.pod_template(
                    workload, item, self._flavor(assignment), checks.template_name(name, item["name"])
                )
                try:
                    self.store.create("v1/podtemplates", template, namespace)
                except ApiError as error:
                    if error.code != 409:
                        raise
                counts[item["name"]] = int(assignment.get("count", item.get("count", 1)))
            self.store.create(
                pr.PROVISIONING_REQUESTS, checks.provisioning_request(workload, config, name, counts), namespace
            )
            return {"state": "Pending", "message": ""}
        return checks.check_state(
            request,
            config,
            attempt,
            admitted=is_true(workload, "Admitted"),
            pod_set_names=[item["name"] for item in pod_sets],
        )

    def delete_requests(self, workload: Obj) -> None:
        """``CleanupProvisioningRequestsOnEviction``: delete the workload's requests (templates follow by GC)."""
        namespace = workload["metadata"]["namespace"]
        for request in self.store.list(pr.PROVISIONING_REQUESTS, namespace)[0]:
            if controlled_by(request, workload):
                self.store.delete(pr.PROVISIONING_REQUESTS, request["metadata"]["name"], namespace)
        for template in self.store.list("v1/podtemplates", namespace)[0]:
            if controlled_by(template, workload):
                self.store.delete("v1/podtemplates", template["metadata"]["name"], namespace)


def _completions_follow_parallelism(job: Obj) -> bool:
    """``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``: partial admission lowers completions too."""
    annotations = job["metadata"].get("annotations") or {}
    return annotations.get(wl.COMPLETIONS_EQUAL_PARALLELISM) == "true"


def _requested_resources(pod_set: Obj) -> list[str]:
    names: list[str] = []
    for container in ((pod_set.get("template") or {}).get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        names += list((resources.get("requests") or {}).keys()) + list((resources.get("limits") or {}).keys())
    return names
