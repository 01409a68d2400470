"""ProvisioningRequest processing inside the simulated cluster-autoscaler (reference 1.4-1.7, 7.A, 7.B).

Per CA loop, requests are handled oldest first:

- ``Failed``/``BookingExpired``/``CapacityRevoked`` requests are terminal for the CA (a queued
  request's nodes still end with ``CapacityRevoked`` at ``maxRunDurationSeconds``).
- A PodTemplate missing at pick-up gives ``Failed=True/FailedToCreatePods`` (terminal).
- 7 days without ``Provisioned=True`` gives ``Failed=True/Expired``.
- ``check-capacity``: fits the existing nodes (minus other requests' bookings) ->
  ``Provisioned=True/CapacityIsFound``; else ``Provisioned=False/CapacityIsNotFound`` retried after
  ``1m, 2m, 4m, 8m, 10m, ...`` or, with ``parameters.noRetry: "true"``, ``Failed=True/CapacityIsNotFound``.
- ``best-effort-atomic-scale-up``: what does not fit existing nodes is provisioned in one
  all-or-nothing increase of one pool (quota, max size and stockouts respected) ->
  ``Provisioned=True/CapacityIsProvisioned`` as soon as the increase is issued (nodes appear after
  the pool's delay); otherwise ``Provisioned=False/CapacityIsNotFound`` with backoff. At most one
  such request provisions per loop, as upstream.
- ``queued-provisioning.gke.io``: ``Accepted=True/SuccessfullyQueued``; queued until the whole request
  fits the queued-provisioning pools, then every node is created at once, labelled
  ``autoscaling.gke.io/provisioning-request=<ResizeRequestName>``; ``Provisioned=True`` when they are all
  Ready, with ``status.provisioningClassDetails.ResizeRequestName``. A request larger than the pools can
  ever hold fails with ``OutOfResources``. At ``maxRunDurationSeconds`` after node creation the nodes
  are deleted and ``CapacityRevoked=True`` is set.
- Garbage collection: a request whose ``Provisioned`` or ``Failed`` condition was last written 7 days
  ago is deleted (``DeleteOldProvReqs``, any class).
- Booking: after ``Provisioned=True`` the capacity is held against *other requests* and protected from
  scale-down until ``BookingExpired=True``: ``CapacityBookingConsumed`` once every requested pod that
  consumes the request is bound, or ``CapacityReservationTimeExpired`` after ``bookingSeconds``.

``Accepted`` and the retried ``Provisioned=False`` rewrite ``lastTransitionTime`` on every attempt
(``conditions.AddOrUpdateCondition``). Simulated instants (when booked, next retry) are kept in memory,
like CA's backoff cache, because object timestamps are wall-clock.

The processor sees the nodes only through :class:`~.node_groups.NodeGroups` (snapshot, group options,
increase, delete, registration), as upstream's ``provisioningrequest/orchestrator/orchestrator.go``
sees them through the scale-up orchestrator and ``cloudprovider.NodeGroup``
(``cloudprovider/cloud_provider.go``); the controller it runs in gives it the Store, the per-object
guard, Events and the scenario's autoscaler settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.autoscaler.node_groups import NodeGroups
from gang_sim.controllers.autoscaler.scaleup import (
    Bin,
    could_ever_fit,
    pack,
    plan_atomic,
)
from gang_sim.controllers.base import Controller, Obj, set_condition
from gang_sim.world.cloud import NodeRecord

QUEUED_BOOKING_EXPIRED_MESSAGE = (
    "Capacity booking for the Provisioning Request has expired and the nodes are now candidates for scale down "
    "when underutilized"
)


@dataclass
class RequestMemory:
    """What the CA remembers about one request (simulated seconds)."""

    first_seen: float
    attempts: int = 0
    next_attempt: float = 0.0
    provisioned_at: float | None = None
    nodes: list[str] = field(default_factory=list)
    nodes_created_at: float | None = None  # earliest creation of ``nodes`` (queued: maxRunDurationSeconds start)
    revoke_at: float | None = None
    provisioned_or_failed_at: float | None = None  # last write of either condition (for garbage collection)

    def remember_nodes(self, records: list[NodeRecord]) -> None:
        """The nodes provisioned for the request (one increase, never empty)."""
        self.nodes = [record.name for record in records]
        self.nodes_created_at = min(record.created_at for record in records)


class RequestProcessor:
    """The ProvisioningRequest classes, run inside ``controller`` on the cluster's ``node_groups``."""

    def __init__(self, controller: Controller, node_groups: NodeGroups) -> None:
        self.controller = controller
        self.node_groups = node_groups
        self.store = controller.store
        self.settings = controller.plane.scenario.autoscaler
        self.memory: dict[str, RequestMemory] = {}
        self.active_bookings: dict[str, tuple[Obj, list[pr.PodSet]]] = {}
        self._now = 0.0
        self._provisioned_this_loop = False

    # -- queries used by the autoscaler -------------------------------------------------------

    def protected_nodes(self) -> set[str]:
        protected: set[str] = set()
        for uid in self.active_bookings:
            protected.update(self.memory[uid].nodes)
        for memory in self.memory.values():
            if memory.nodes and memory.provisioned_at is None:
                protected.update(memory.nodes)  # queued nodes still coming up
        return protected

    def reserve_bookings(self, bins: list[Bin], pods: list[Obj], exclude: str | None = None) -> None:
        """Take the capacity booked by Provisioned requests (minus their bound pods) out of ``bins``."""
        for uid, (request, pod_sets) in self.active_bookings.items():
            if uid == exclude:
                continue
            remaining = pr.requested_pods(request) - len(self._bound_consumers(request, pods))
            specs = [pod_set.spec for pod_set in pod_sets for _ in range(pod_set.count)][: max(0, remaining)]
            pack(specs, bins)

    # -- the loop ---------------------------------------------------------------------------------

    def process(self, now: float, pods: list[Obj], nodes: list[Obj]) -> None:
        try:
            requests, _ = self.store.list(pr.PROVISIONING_REQUESTS)
        except ApiError as error:
            if error.code == 404:  # the ProvisioningRequest CRD is not installed: nothing to do
                return
            raise
        templates: dict[tuple[str, str], Obj] = {
            (item["metadata"]["namespace"], item["metadata"]["name"]): item
            for item in self.store.list("v1/podtemplates")[0]
        }
        live = {request["metadata"]["uid"] for request in requests}
        for uid in set(self.memory) - live:
            del self.memory[uid]
        self.active_bookings = {uid: value for uid, value in self.active_bookings.items() if uid in live}
        self._provisioned_this_loop = False
        self._now = now
        requests = self._collect_garbage(requests, now)
        ordered = sorted(
            requests, key=lambda item: (item["metadata"].get("creationTimestamp", ""), item["metadata"]["name"])
        )
        for request in ordered:
            if request["spec"].get("provisioningClassName") not in pr.SUPPORTED_CLASSES:
                continue
            with self.controller.guard(request):
                namespace = request["metadata"]["namespace"]
                own = {name: obj for (ns, name), obj in templates.items() if ns == namespace}
                self._handle(request, own, now, pods, nodes)

    def _collect_garbage(self, requests: list[Obj], now: float) -> list[Obj]:
        """``DeleteOldProvReqs``: delete requests whose Provisioned or Failed condition is 7 days old.

        Like upstream it looks only at when that condition was last written, whatever its status, and
        for every class.
        """
        kept = []
        for request in requests:
            memory = self.memory.get(request["metadata"]["uid"])
            written = None if memory is None else memory.provisioned_or_failed_at
            if written is not None and now - written >= pr.TERMINAL_TTL_SECONDS:
                metadata = request["metadata"]
                with self.controller.guard(request):
                    self.store.delete(pr.PROVISIONING_REQUESTS, metadata["name"], metadata["namespace"])
                continue
            kept.append(request)
        return kept

    def _handle(self, request: Obj, templates: dict[str, Obj], now: float, pods: list[Obj], nodes: list[Obj]) -> None:
        uid = request["metadata"]["uid"]
        state = pr.classify(request)
        queued = request["spec"]["provisioningClassName"] == pr.QUEUED_PROVISIONING
        memory = self.memory.get(uid)
        if memory is None:
            memory = self.memory[uid] = self._recall(request, state, queued, now)
        revocable = queued and state in (pr.State.PROVISIONED, pr.State.BOOKING_EXPIRED)
        if revocable and memory.revoke_at is not None and now >= memory.revoke_at:
            self._revoke(request, memory, now)
            return
        if state in (pr.State.FAILED, pr.State.BOOKING_EXPIRED, pr.State.REVOKED):
            self.active_bookings.pop(uid, None)
            return
        if state is pr.State.PROVISIONED:
            self._check_booking(request, memory, templates, now, pods, queued)
            return
        if now - memory.first_seen >= pr.EXPIRY_SECONDS:
            self._write(request, ("Failed", "True", "Expired", pr.EXPIRED_MESSAGE))
            return
        missing = pr.missing_templates(request, templates)
        if missing:
            message = f"missing pod templates: {', '.join(missing)}"
            self._write(request, ("Failed", "True", "FailedToCreatePods", message))
            self.controller.plane.record_event(
                request, "FailedToCreatePods", message, warning=True, component="cluster-autoscaler"
            )
            return
        if now < memory.next_attempt:
            return
        pod_sets = pr.pod_sets(request, templates)
        specs = [pod_set.spec for pod_set in pod_sets for _ in range(pod_set.count)]
        if queued:
            self._handle_queued(request, memory, pod_sets, specs, now)
            return
        bins = self.node_groups.node_bins(pods, nodes)
        self.reserve_bookings(bins, pods, exclude=uid)
        leftover = pack(specs, bins)
        accepted = ("Accepted", "True", "Accepted", pr.ACCEPTED_MESSAGE)
        if not leftover:
            self._provisioned(request, memory, pod_sets, now, accepted, "CapacityIsFound")
            return
        if request["spec"]["provisioningClassName"] == pr.CHECK_CAPACITY:
            if pr.is_no_retry(request):
                self._write(request, accepted, ("Failed", "True", "CapacityIsNotFound", pr.NO_RETRY_MESSAGE))
                return
            self._retry_later(request, memory, now, accepted)
            return
        if self._provisioned_this_loop:
            return
        plan = plan_atomic(leftover, self.node_groups.group_options(now, queued=False))
        if plan is None:
            self._retry_later(request, memory, now, accepted)
            return
        pool, count = plan
        self._provisioned_this_loop = True
        memory.remember_nodes(self.node_groups.add_nodes(pool, count, now))
        self._provisioned(request, memory, pod_sets, now, accepted, "CapacityIsProvisioned")

    def _recall(self, request: Obj, state: pr.State, queued: bool, now: float) -> RequestMemory:
        """The memory of a request this autoscaler has not seen yet: empty, but for a queued request
        whose nodes the cloud already created (before a restart of the autoscaler) - they are not
        created again, and a Provisioned request's nodes are still revoked at maxRunDurationSeconds."""
        memory = RequestMemory(first_seen=now)
        records = self.node_groups.nodes_provisioned_for(_resize_name(request)) if queued else []
        if records:
            memory.remember_nodes(records)
            if state in (pr.State.PROVISIONED, pr.State.BOOKING_EXPIRED) and memory.nodes_created_at is not None:
                memory.provisioned_at = now
                memory.revoke_at = memory.nodes_created_at + pr.max_run_duration(request)
        return memory

    def _handle_queued(
        self, request: Obj, memory: RequestMemory, pod_sets: list[pr.PodSet], specs: list[Any], now: float
    ) -> None:
        accepted = ("Accepted", "True", "SuccessfullyQueued", "Provisioning Request was successfully queued.")
        if memory.nodes:
            if memory.nodes_created_at is not None and all(
                self.node_groups.is_registered(name) for name in memory.nodes
            ):
                memory.revoke_at = memory.nodes_created_at + pr.max_run_duration(request)
                details = {"ResizeRequestName": _resize_name(request)}
                self._provisioned(request, memory, pod_sets, now, accepted, "Provisioned", details=details)
            return
        pr.max_run_duration(request)  # validate early: a malformed parameter is reported, not queued forever
        if pr.classify(request) is pr.State.NEW:
            self._write(request, accepted)
        if now - memory.first_seen < self.settings.queued_provisioning_delay_seconds:
            return
        options = self.node_groups.group_options(now, queued=True)
        plan = plan_atomic(specs, options)
        if plan is None:
            scenario = self.controller.plane.scenario
            if not could_ever_fit(specs, options, lambda name: scenario.pool(name).max_nodes):
                pools = ", ".join(option.name for option in options) or "none"
                message = f"max cluster limit reached, nodepools out of resources: {pools}"
                self._write(request, accepted, ("Failed", "True", "OutOfResources", message))
            return
        if self._provisioned_this_loop:
            return
        self._provisioned_this_loop = True
        pool, count = plan
        memory.remember_nodes(self.node_groups.add_nodes(pool, count, now, provisioning_request=_resize_name(request)))

    def _provisioned(
        self,
        request: Obj,
        memory: RequestMemory,
        pod_sets: list[pr.PodSet],
        now: float,
        accepted: tuple[str, str, str, str],
        reason: str,
        details: dict[str, str] | None = None,
    ) -> None:
        memory.provisioned_at = now
        message = "Provisioning Request was successfully provisioned." if details else pr.CAPACITY_FOUND_MESSAGE
        self._write(request, accepted, ("Provisioned", "True", reason, message), details=details)
        self.active_bookings[request["metadata"]["uid"]] = (request, pod_sets)

    def _retry_later(
        self, request: Obj, memory: RequestMemory, now: float, accepted: tuple[str, str, str, str]
    ) -> None:
        memory.attempts += 1
        settings = self.settings
        memory.next_attempt = now + pr.retry_delay(
            memory.attempts, initial=settings.initial_backoff_seconds, maximum=settings.max_backoff_seconds
        )
        self._write(request, accepted, ("Provisioned", "False", "CapacityIsNotFound", pr.CAPACITY_NOT_FOUND_MESSAGE))

    def _check_booking(
        self, request: Obj, memory: RequestMemory, templates: dict[str, Obj], now: float, pods: list[Obj], queued: bool
    ) -> None:
        uid = request["metadata"]["uid"]
        if memory.provisioned_at is None:
            memory.provisioned_at = now  # provisioned before this CA started: book from now
        if uid not in self.active_bookings and not pr.missing_templates(request, templates):
            self.active_bookings[uid] = (request, pr.pod_sets(request, templates))
        if len(self._bound_consumers(request, pods)) >= pr.requested_pods(request):
            ending = ("BookingExpired", "True", "CapacityBookingConsumed", pr.BOOKING_CONSUMED_MESSAGE)
        elif now >= memory.provisioned_at + self.settings.booking_seconds:
            message = QUEUED_BOOKING_EXPIRED_MESSAGE if queued else pr.RESERVATION_EXPIRED_MESSAGE
            ending = ("BookingExpired", "True", "CapacityReservationTimeExpired", message)
        else:
            return
        self._write(request, ending)
        self.active_bookings.pop(uid, None)

    def _revoke(self, request: Obj, memory: RequestMemory, now: float) -> None:
        for name in memory.nodes:
            self.node_groups.remove_node(name, now)
        message = "maxRunDurationSeconds reached: the provisioned nodes are being deleted"
        self._write(request, ("CapacityRevoked", "True", "MaxRunDurationSecondsReached", message))
        self.active_bookings.pop(request["metadata"]["uid"], None)

    def _bound_consumers(self, request: Obj, pods: list[Obj]) -> list[Obj]:
        metadata = request["metadata"]
        return [
            pod
            for pod in pods
            if pod["metadata"].get("namespace") == metadata["namespace"]
            and pr.consumed_request(pod) == metadata["name"]
            and (pod.get("spec") or {}).get("nodeName")
        ]

    def _write(self, request: Obj, *updates: tuple[str, str, str, str], details: dict[str, str] | None = None) -> None:
        metadata = request["metadata"]
        conditions = list((request.get("status") or {}).get("conditions") or [])
        generation = {"observedGeneration": int(metadata.get("generation", 1))}
        if any(update[0] in ("Provisioned", "Failed") for update in updates):
            memory = self.memory.get(metadata["uid"])
            if memory is not None:
                memory.provisioned_or_failed_at = self._now
        for condition_type, value, reason, message in updates:
            conditions = set_condition(
                conditions, condition_type, value, reason, message, always_touch=True, extra=generation
            )
        status: dict[str, Any] = {"conditions": conditions}
        if details:
            status["provisioningClassDetails"] = details
        updated = self.store.patch(
            pr.PROVISIONING_REQUESTS,
            metadata["name"],
            {"status": status},
            namespace=metadata["namespace"],
            subresource="status",
        )
        request["status"] = updated.get("status")


def _resize_name(request: Obj) -> str:
    return f"resize-{request['metadata']['uid'].replace('-', '')[:16]}"
