"""The simulated MultiKueue controllers of a manager cluster: the one part of MultiKueue that talks to
the Store and to the workers.

Per pass (level-triggered; a pass also runs when a worker's cache changed):

1. every MultiKueueCluster gets a :class:`~.remote.RemoteCluster` built from the kubeconfig of its
   Secret (``spec.clusterSource.kubeConfig``, ``locationType: Secret``, key ``kubeconfig`` in
   Kueue's namespace ``kueue-system``) and its ``Active`` condition: ``True/Active`` "Connected" once
   the worker answers, ``False/ClientConnectionFailed`` while it does not, ``False/BadKubeConfig``
   without a usable kubeconfig (upstream ``multikueuecluster.go``);
2. every MultiKueue AdmissionCheck gets its ``Active`` condition from its MultiKueueConfig's
   clusters (:func:`.multikueue.check_activity`);
3. every Workload with a MultiKueue check is reconciled with the copies its config's active workers
   hold (:func:`.multikueue.reconcile_group`), and copies whose manager Workload is gone are deleted
   (:func:`.multikueue.orphans`).

Writes to the manager's Store are made in the pass; writes to a worker run as tasks of their own (one
per object and verb at a time) and list that worker again when they end.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import yaml

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.base import Controller, Obj, condition, same_conditions, set_condition, wall_time
from gang_sim.controllers.kueue import multikueue as mk
from gang_sim.controllers.kueue import workloads as wl
from gang_sim.controllers.kueue.remote import KubeconfigError, RemoteCluster

LOG = logging.getLogger(__name__)
CLUSTERS = "kueue.x-k8s.io/v1beta2/multikueueclusters"
CONFIGS = "kueue.x-k8s.io/v1beta2/multikueueconfigs"
SECRETS = "v1/secrets"
KUEUE_NAMESPACE = "kueue-system"
"""Where Kueue (and so MultiKueue) reads the kubeconfig Secrets (its configuration's ``namespace``)."""
KUBECONFIG_KEY = "kubeconfig"
POLL_SECONDS = 0.1
"""Real seconds between two LISTs of a worker's copies."""
Remote = tuple[str, str, str, str]
"""A write in flight: ``(cluster, verb, resource, namespace/name)``."""


class MultiKueueDispatcher(Controller):
    component = "kueue-multikueue"
    watches = frozenset({wl.WORKLOADS, mk.JOBS, wl.RESOURCES["acs"], CLUSTERS, CONFIGS, SECRETS})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.origin = mk.DEFAULT_ORIGIN
        self.remotes: dict[str, RemoteCluster] = {}
        self._sources: dict[str, str] = {}
        self._in_flight: set[Remote] = set()
        self._writes: set[asyncio.Future[None]] = set()

    def reconcile(self, now: float) -> float | None:
        try:
            self.store.resolve(CLUSTERS)
        except ApiError as error:
            if error.code == 404:  # the MultiKueue CRDs are not installed: nothing to dispatch
                return None
            raise
        checks = {
            item["metadata"]["name"]: item
            for item in self.store.list(wl.RESOURCES["acs"])[0]
            if (item.get("spec") or {}).get("controllerName") == mk.CONTROLLER
        }
        clusters = {item["metadata"]["name"]: item for item in self.store.list(CLUSTERS)[0]}
        self._sync_remotes(clusters)
        configs = {item["metadata"]["name"]: item for item in self.store.list(CONFIGS)[0]}
        members = {name: mk.config_clusters(configs.get(mk.config_name(check) or "")) for name, check in checks.items()}
        for name, check in checks.items():
            with self.guard(check):
                self._write_active(wl.RESOURCES["acs"], check, mk.check_activity(members[name], clusters))
        workloads, _ = self.store.list(wl.WORKLOADS)
        for workload in workloads:
            with self.guard(workload):
                self._dispatch(workload, checks, members)
        live = {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in workloads}
        for name, remote in self.remotes.items():
            if remote.active:
                found = remote.objects
                self._apply_remote(mk.orphans(name, found[mk.WORKLOADS].values(), found[mk.JOBS].values(), live))
        return None

    async def close(self) -> None:
        for remote in self.remotes.values():
            await remote.close()
        for write in list(self._writes):
            write.cancel()
        await asyncio.gather(*self._writes, return_exceptions=True)

    # -- the workers ---------------------------------------------------------------------------------

    def _sync_remotes(self, clusters: Mapping[str, Obj]) -> None:
        """One poller per MultiKueueCluster with a usable kubeconfig; the clusters' ``Active``."""
        for name in set(self.remotes) - set(clusters):
            self._stop(name)
        for name, cluster in clusters.items():
            with self.guard(cluster):
                source, problem = self._kubeconfig_of(cluster)
                if source != self._sources.get(name):
                    self._stop(name)
                if source is not None and name not in self.remotes:
                    try:
                        self._start(name, source)
                    except (KubeconfigError, yaml.YAMLError) as error:
                        problem = f"load client config failed: {error}"
                remote = self.remotes.get(name)
                if problem is not None or remote is None:
                    wanted = ("False", "BadKubeConfig", problem or "no kubeconfig")
                elif remote.active is None:
                    continue
                elif remote.active:
                    wanted = ("True", "Active", "Connected")
                else:
                    wanted = ("False", "ClientConnectionFailed", remote.error)
                self._write_active(CLUSTERS, cluster, wanted)

    def _kubeconfig_of(self, cluster: Obj) -> tuple[str | None, str | None]:
        """The kubeconfig text of a MultiKueueCluster's Secret, or why there is none."""
        reference = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        if reference.get("locationType", "Secret") != "Secret":
            return None, "only kubeconfig Secrets are modelled (locationType: Secret)"
        try:
            secret = self.store.get(SECRETS, str(reference.get("location")), KUEUE_NAMESPACE)
        except ApiError:
            return None, f'secrets "{reference.get("location")}" not found'
        encoded = (secret.get("data") or {}).get(KUBECONFIG_KEY)
        if not encoded:
            return None, f'key "{KUBECONFIG_KEY}" not found in secret "{reference.get("location")}"'
        return base64.b64decode(encoded).decode(), None

    def _start(self, name: str, source: str) -> None:
        kubeconfig = yaml.safe_load(source)
        remote = RemoteCluster(
            name,
            kubeconfig if isinstance(kubeconfig, dict) else {},
            f"{mk.ORIGIN_LABEL}={self.origin}",
            self._dirty.set,
            poll_seconds=POLL_SECONDS,
            resources=(mk.WORKLOADS, mk.JOBS),
        )
        remote.start()
        self.remotes[name], self._sources[name] = remote, source

    def _stop(self, name: str) -> None:
        remote = self.remotes.pop(name, None)
        self._sources.pop(name, None)
        if remote is not None:
            self._spawn(remote.close())

    # -- one Workload ---------------------------------------------------------------------------------

    def _dispatch(self, workload: Obj, checks: Mapping[str, Obj], members: Mapping[str, list[str] | None]) -> None:
        entries = [item.get("name") for item in (workload.get("status") or {}).get("admissionChecks") or []]
        check = next((name for name in entries if name in checks), None)
        if check is None:
            return
        metadata = workload["metadata"]
        remotes = {
            name: mk.Remote(
                self.remotes[name].objects[mk.WORKLOADS].get((metadata["namespace"], metadata["name"])),
                self._remote_job(name, workload),
            )
            for name in members.get(check) or []
            if name in self.remotes and self.remotes[name].active
        }
        group = mk.Group(
            local=workload,
            local_job=self._local_job(workload),
            check=check,
            remotes=remotes,
            origin=self.origin,
            wall_clock=datetime.now(timezone.utc),
        )
        actions = mk.reconcile_group(group)
        self._apply_remote(actions)
        for action in actions:
            if isinstance(action, mk.CheckState):
                self._set_check(workload, check, action)
            elif isinstance(action, mk.MirrorJobStatus) and group.local_job is not None:
                self._mirror(group.local_job, action.status)
            elif isinstance(action, mk.Finish):
                self._finish(workload, action)

    def _local_job(self, workload: Obj) -> Obj | None:
        references = workload["metadata"].get("ownerReferences") or []
        reference = next((ref for ref in references if ref.get("kind") == "Job"), None)
        if reference is None:
            return None
        try:
            return self.store.get(mk.JOBS, reference["name"], workload["metadata"]["namespace"])
        except ApiError:
            return None

    def _remote_job(self, cluster: str, workload: Obj) -> Obj | None:
        metadata = workload["metadata"]
        for job in self.remotes[cluster].objects[mk.JOBS].values():
            labels = job["metadata"].get("labels") or {}
            same = job["metadata"]["namespace"] == metadata["namespace"]
            if same and labels.get(wl.PREBUILT_WORKLOAD) == metadata["name"]:
                return job
        return None

    def _set_check(self, workload: Obj, check: str, change: mk.CheckState) -> None:
        status = workload.get("status") or {}
        entries = []
        for entry in status.get("admissionChecks") or []:
            if entry.get("name") == check:
                moved = entry.get("state") != change.state
                entry = {**entry, "state": change.state, "message": change.message}
                if moved:
                    entry["lastTransitionTime"] = wall_time()
            entries.append(entry)
        body: dict[str, Any] = {"admissionChecks": entries}
        if change.cluster_name is not None and not status.get("clusterName"):
            body.update(clusterName=change.cluster_name, nominatedClusterNames=None)
        self.store.patch(
            wl.WORKLOADS,
            workload["metadata"]["name"],
            {"status": body},
            namespace=workload["metadata"]["namespace"],
            subresource="status",
        )
        self.plane.record_event(workload, "MultiKueue", change.message, component=self.component)

    def _mirror(self, job: Obj, status: Obj) -> None:
        if json.dumps(job.get("status") or {}, sort_keys=True) == json.dumps(status, sort_keys=True):
            return
        namespace = job["metadata"]["namespace"]
        self.store.replace(mk.JOBS, {**job, "status": status}, subresource="status", namespace=namespace)

    def _finish(self, workload: Obj, finish: mk.Finish) -> None:
        current = list((workload.get("status") or {}).get("conditions") or [])
        conditions = set_condition(current, "Finished", "True", finish.reason, finish.message)
        metadata = workload["metadata"]
        body = {"status": {"conditions": conditions}}
        self.store.patch(wl.WORKLOADS, metadata["name"], body, namespace=metadata["namespace"], subresource="status")

    # -- writing ---------------------------------------------------------------------------------------

    def _write_active(self, resource: str, obj: Obj, wanted: tuple[str, str, str]) -> None:
        """Set ``Active`` on a cluster-scoped object when its status, reason or message changed."""
        current = list((obj.get("status") or {}).get("conditions") or [])
        updated = set_condition(current, "Active", *wanted)
        found = condition(obj, "Active") or {}
        if same_conditions(current, updated) and found.get("message") == wanted[2]:
            return
        self.store.patch(resource, obj["metadata"]["name"], {"status": {"conditions": updated}}, subresource="status")

    def _apply_remote(self, actions: Iterable[mk.Action]) -> None:
        for action in actions:
            if isinstance(action, mk.RemoteCreate):
                metadata = action.body["metadata"]
                key = (action.cluster, "create", action.resource, f"{metadata['namespace']}/{metadata['name']}")
                self._write(key, action.cluster, lambda remote, a=action: remote.create(a.resource, a.body))
            elif isinstance(action, mk.RemoteDelete):
                key = (action.cluster, "delete", action.resource, f"{action.namespace}/{action.name}")
                self._write(
                    key, action.cluster, lambda remote, a=action: remote.delete(a.resource, a.namespace, a.name)
                )

    def _write(self, key: Remote, cluster: str, call: Any) -> None:
        remote = self.remotes.get(cluster)
        if remote is None or key in self._in_flight:
            return
        self._in_flight.add(key)

        async def run() -> None:
            try:
                await call(remote)
            except Exception as error:  # decided again on the next pass, as a failed reconcile is retried
                LOG.warning("MultiKueue: %s on %s failed: %s", key[1:], cluster, error)
            finally:
                self._in_flight.discard(key)
                remote.poke()

        self._spawn(run())

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
