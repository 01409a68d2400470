"""The simulated cluster and the job driver the cost replays (``bench/seed_cost_model.py``) run on.

:class:`CostCluster` is a :class:`ClusterHarness` on a ManualClock with what a cost replay
reads from the emulator:

- the **bill**: every node the simulated cloud created, from its creation (the scale-up decision;
  the VM boots during ``provisioningDelaySeconds``) to its deletion, times its GPUs. This is the
  cloud's own node record (``gang_sim/world/cloud.py`` ``NodeRecord``), and the Node objects the API served
  are checked against it (registered at ``created + provisioning delay``, deleted at the record's
  deletion instant);
- the simulated instant each pod went ``Running`` (from the store's change feed, exact, because pod
  timestamps are wall-clock);
- :meth:`CostCluster.preempt_node`: a spot termination notice to one node (the emulator's GKE
  preemption, ``docs/emulator.md`` "Spot preemption").

:class:`Job` drives one distributed job, try after try, through the Kubernetes API, in one of two
ways: plain member pods created without any reservation, or the provider's ProvisioningRequest path
(owner ConfigMap, PodTemplate, ``best-effort-atomic-scale-up`` ProvisioningRequest, members consuming
it once ``Provisioned=True``; built by ``reservation.manifests``). The members are simulated
containers that behave like ``torch.distributed`` ranks at a static rendezvous
(``init_process_group(timeout=...)``, https://pytorch.org/docs/stable/distributed.html): a started
member waits for the others and exits 1 when its rendezvous timeout passes. The job plays the
rendezvous store: when every member runs, it tells them (their ``sim.gang.dev/run-seconds`` becomes
"now + the work left", exit code 0). Any member failing or vanishing kills the try (all its pods are
deleted) and the job is retried after ``retry_delay``.

With ``checkpoint_every`` the job has the provider's ``checkpoint`` (``reservation.checkpoint``): every
try's members get ``GANG_CHECKPOINT_DIR`` and, once an earlier try reported a checkpoint,
``GANG_RESUME_STEP`` (``checkpoint.resume_step`` over the tries' reports); a member trains the steps
left after it, one step per simulated second. A stopped try's checkpoint is read as the provider
reads it: ``checkpoint.report_of_pod`` on the kubelet's ``state.terminated.message`` of its members,
whose content (the trainer's last periodic save) the job writes for the simulated containers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config

from airflow_provider_gang.reservation import checkpoint, conditions
from airflow_provider_gang.reservation import members as member_state
from airflow_provider_gang.reservation.manifests import common, owner, pods, provisioning
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources
from gang_sim.controllers.autoscaler.cluster_autoscaler import ClusterAutoscaler
from gang_sim.controllers.kubelet.simulated_runtime import EXIT_CODE, RUN_SECONDS, TERMINATION_MESSAGE
from gang_sim.testing import ClusterHarness
from gang_sim.world.scenario import Scenario

ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
NAMESPACE = "default"
STEP_SECONDS = 10.0
"""How often the job looks at its pods (simulated seconds): the autoscaler's scan interval."""
RENDEZVOUS_EXIT_CODE = 1
"""What a member exits with when the rendezvous timeout passes before every member runs."""


@dataclass(frozen=True)
class NodeBill:
    name: str
    gpus: int
    created_at: float
    deleted_at: float | None

    def gpu_seconds(self, until: float, since: float = 0.0) -> float:
        """GPU-seconds billed between ``since`` and ``until``."""
        end = until if self.deleted_at is None else min(self.deleted_at, until)
        return max(0.0, end - max(since, self.created_at)) * self.gpus


class CostCluster:
    """A started emulator + simulated control plane on a ManualClock (use as a context manager)."""

    def __init__(self, scenario: Scenario) -> None:
        self.harness = ClusterHarness(scenario=scenario, seed=0)
        self.started_at: dict[str, float] = {}
        self.node_registered: dict[str, float] = {}
        self.node_deleted: dict[str, float] = {}
        self.api: client.ApiClient | None = None

    def __enter__(self) -> CostCluster:
        self.harness.start()
        self.harness.run(lambda: self.harness.store.subscribe(self._observe))
        self.api = config.new_client_from_config(str(self.harness.kubeconfig_path))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.api is not None:
            self.api.close()
        self.harness.stop()

    def _observe(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        """Store change feed (server loop): stamp pod starts and node (de)registrations in simulated time."""
        now = self.harness.clock.now()
        if resource == "v1/pods":
            uid = obj["metadata"]["uid"]
            if (obj.get("status") or {}).get("phase") == "Running" and uid not in self.started_at:
                self.started_at[uid] = now
        elif resource == "v1/nodes":
            name = obj["metadata"]["name"]
            if event_type == "ADDED":
                self.node_registered[name] = now
            elif event_type == "DELETED":
                self.node_deleted[name] = now

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def now(self) -> float:
        return self.harness.now()

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.harness.advance(seconds, timeout=600)

    def _autoscaler(self) -> ClusterAutoscaler:
        control = self.harness.control
        assert control is not None and control.running is not None
        autoscaler = control.running.controller(ClusterAutoscaler)
        assert isinstance(autoscaler, ClusterAutoscaler)
        return autoscaler

    def bill(self) -> list[NodeBill]:
        """Every node the cloud created (the cloud's record), checked against the Node objects served."""
        records = self.harness.run(lambda: list(self._autoscaler().cloud.nodes.values()))
        bills = []
        for record in records:
            registered = self.node_registered.get(record.name)
            if registered is not None and not math.isclose(registered, record.ready_at):
                raise AssertionError(
                    f"node {record.name} registered at {registered}, provisioned for {record.ready_at}"
                )
            if record.deleted_at is not None and record.name in self.node_registered:
                deleted = self.node_deleted.get(record.name)
                if deleted is None or not math.isclose(deleted, record.deleted_at):
                    raise AssertionError(
                        f"node {record.name} object deleted at {deleted}, billed to {record.deleted_at}"
                    )
            bills.append(NodeBill(record.name, record.gpus, record.created_at, record.deleted_at))
        return bills

    def live_nodes(self) -> list[str]:
        return [bill.name for bill in self.bill() if bill.deleted_at is None]

    def preempt_node(self, name: str) -> None:
        """A spot termination notice to node ``name`` now (``ClusterHarness.preempt``: GKE's
        taint, the kubelet stops the pods to ``Failed``/``Terminated``, the node goes 30 s later)."""
        self.harness.preempt(name)
        self.harness.advance(0)  # let the kubelet stop the node's pods before anyone looks

    def wait_until_no_nodes(self, limit: float) -> None:
        """Advance until the autoscaler scaled every node down (its bill is closed), at most ``limit`` s."""
        deadline = self.now() + limit
        while self.live_nodes():
            if self.now() >= deadline:
                raise RuntimeError(f"nodes {self.live_nodes()} were not scaled down within {limit:g} s")
            self.advance(60)


@dataclass(frozen=True)
class JobSettings:
    """One distributed job: ``size`` members of ``gpus`` GPUs that train ``work_seconds`` (one step per
    simulated second) once all run; ``gang``: the provider's ProvisioningRequest path, else plain pods."""

    size: int
    gpus: int
    work_seconds: float
    rendezvous_timeout: float
    retry_delay: float
    gang: bool
    spot: bool = False
    checkpoint_every: int | None = None
    """Steps between checkpoints; ``None``: no checkpoint argument, every try starts from step 0."""
    max_tries: int = 10


@dataclass
class TryRecord:
    """One try, in simulated seconds: when it started and ended, how (``rendezvous timeout``,
    ``spot preempted``, ``member lost``, ``succeeded``), the step it resumed from and how long it
    trained once every member ran."""

    number: int
    started_at: float
    outcome: str = ""
    ended_at: float = 0.0
    resumed_from: int = 0
    trained_seconds: float = 0.0
    training_started: float | None = None
    checkpoint_step: int | None = None
    """The checkpoint the try's members reported (``reservation.checkpoint.CheckpointReport.step``)."""


@dataclass
class Job:
    cluster: CostCluster
    settings: JobSettings
    name: str
    tries: list[TryRecord] = field(default_factory=list)

    def spec(self, number: int) -> GangSpec:
        template = {
            "metadata": {
                "annotations": {
                    RUN_SECONDS: str(self.settings.rendezvous_timeout),
                    EXIT_CODE: str(RENDEZVOUS_EXIT_CODE),
                }
            },
            "spec": {
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "trainer", "image": "registry.example/trainer:1.0"}],
            },
        }
        resume = checkpoint.resume_step([record.checkpoint_step for record in self.tries])
        location = checkpoint.Checkpoint(location=f"gs://bench/{self.name}").for_try(number, resume)
        return GangSpec(
            name=f"{self.name}-{number}",
            namespace=NAMESPACE,
            size=self.settings.size,
            pod_template=template,
            resources=MemberResources(gpus=self.settings.gpus, cpu="4", memory="32Gi"),
            provisioning_class=ATOMIC,
            spot=self.settings.spot,
            checkpoint=location if self.settings.checkpoint_every is not None else None,
        )

    def run(self, *, preempt_at: Callable[[float], float | None] = lambda _: None) -> None:
        """Tries until one trains to the end. ``preempt_at(training_started)`` may name an instant at
        which rank 0's node gets a spot termination notice (only the first try that trains is asked)."""
        for number in range(1, self.settings.max_tries + 1):
            spec = self.spec(number)
            record = TryRecord(number, self.cluster.now())
            owner_uid = self._create_owner(spec)
            if self.settings.gang:
                self._reserve(spec, owner_uid)
            self._create_members(spec, owner_uid)
            asked = any(earlier.training_started is not None for earlier in self.tries)
            record.outcome = self._rendezvous_and_train(spec, record, (lambda _: None) if asked else preempt_at)
            self.cluster.core.delete_namespaced_config_map(spec.name, NAMESPACE)  # garbage-collects the try
            record.ended_at = self.cluster.now()
            self.tries.append(record)
            if record.outcome == "succeeded":
                return
            self.cluster.advance(self.settings.retry_delay)
        raise RuntimeError(f"{self.name}: no try succeeded in {self.settings.max_tries}")

    def _create_owner(self, spec: GangSpec) -> str:
        created = self.cluster.core.create_namespaced_config_map(NAMESPACE, owner.owner_config_map(spec))
        return str(created.metadata.uid)

    def _reserve(self, spec: GangSpec, owner_uid: str) -> None:
        self.cluster.core.create_namespaced_pod_template(
            NAMESPACE, provisioning.pod_template(spec, owner_uid=owner_uid)
        )
        request = provisioning.provisioning_request(spec, owner_uid=owner_uid)
        args = ("autoscaling.x-k8s.io", "v1", NAMESPACE, "provisioningrequests")
        self.cluster.custom.create_namespaced_custom_object(*args, request)
        while True:
            current = self.cluster.custom.get_namespaced_custom_object(*args, spec.name)
            if conditions.is_provisioned(current):
                return
            if conditions.is_failed(current):
                raise RuntimeError(f"{spec.name}: {conditions.condition_message(current, 'Failed')}")
            self.cluster.advance(STEP_SECONDS)

    def _create_members(self, spec: GangSpec, owner_uid: str) -> None:
        for rank in range(spec.size):
            if self.settings.gang:
                body = pods.launch_pod(spec, rank, owner_uid=owner_uid)
            else:  # the same member, created as a plain pod: no reservation, nothing consumed
                template = pods.member_template(spec)
                metadata = common.metadata(spec, f"{spec.name}-{rank}", common.ROLE_MEMBER, owner_uid)
                metadata["labels"] = {**template["metadata"]["labels"], **metadata["labels"]}
                metadata["annotations"] = dict(template["metadata"]["annotations"])
                body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
            self.cluster.core.create_namespaced_pod(NAMESPACE, body, _preload_content=False)

    def _members(self, spec: GangSpec) -> list[dict[str, Any]]:
        selector = common.member_selector(spec)
        answer = self.cluster.core.list_namespaced_pod(NAMESPACE, label_selector=selector, _preload_content=False)
        return list(json.loads(answer.data)["items"])

    def _rendezvous_and_train(
        self, spec: GangSpec, record: TryRecord, preempt_at: Callable[[float], float | None]
    ) -> str:
        training_started: float | None = None
        preemption: float | None = None
        work = self.settings.work_seconds
        while True:
            members = self._members(spec)
            phases = [(member.get("status") or {}).get("phase") for member in members]
            if training_started is None and "Failed" in phases:
                return "rendezvous timeout"
            if training_started is not None and (len(members) < spec.size or "Failed" in phases):
                record.trained_seconds = self.cluster.now() - training_started
                reports = [checkpoint.report_of_pod(member, member_state.member_rank(member))[0] for member in members]
                latest = checkpoint.latest(reports)
                record.checkpoint_step = None if latest is None else latest.step
                preempted = any(member_state.is_spot_preempted(member) for member in members)
                return "spot preempted" if preempted else "member lost"
            if phases.count("Succeeded") == spec.size:
                record.trained_seconds = self.settings.work_seconds - record.resumed_from
                return "succeeded"
            if training_started is None and phases.count("Running") == spec.size:
                training_started = record.training_started = self.cluster.now()
                record.resumed_from = resume_step_of(members[0])
                work = self.settings.work_seconds - record.resumed_from
                self._complete_rendezvous(members, training_started, work)
                preemption = preempt_at(training_started)
            if training_started is None:
                self.cluster.advance(STEP_SECONDS)
            elif preemption is not None and self.cluster.now() < preemption:
                self.cluster.advance(preemption - self.cluster.now())
                self._write_termination_messages(members, record, preemption - training_started)
                rank_0 = next(member for member in members if member_state.member_rank(member) == 0)
                self.cluster.preempt_node(rank_0["spec"]["nodeName"])
                preemption = None
            else:
                self.cluster.advance(max(STEP_SECONDS, training_started + work - self.cluster.now()))

    def _complete_rendezvous(self, members: list[dict[str, Any]], now: float, work: float) -> None:
        """Every member runs: each learns it and trains ``work`` seconds from now, then exits 0."""
        for member in members:
            ran = now - self.cluster.started_at[member["metadata"]["uid"]]
            patch = {"metadata": {"annotations": {RUN_SECONDS: f"{ran + work:.3f}", EXIT_CODE: "0"}}}
            self.cluster.core.patch_namespaced_pod(member["metadata"]["name"], NAMESPACE, patch, _preload_content=False)

    def _write_termination_messages(self, members: list[dict[str, Any]], record: TryRecord, trained: float) -> None:
        """What the provider's example trainer keeps in its termination-message file after every step
        (``dags/trainer/ddp_train.py``): ``{"checkpoint_step", "step"}``, the last periodic save and
        the current step; a simulated container's file is its ``sim.gang.dev/termination-message``.
        Written just before the preemption, which is when the file's content matters: the kubelet
        copies it into the stopped containers' ``state.terminated.message``. Without a checkpoint
        argument the trainer writes nothing."""
        every = self.settings.checkpoint_every
        if every is None:
            return
        step = record.resumed_from + int(trained)
        saved = record.resumed_from + int(trained // every) * every
        if saved == 0:
            return
        message = json.dumps({"checkpoint_step": saved, "step": step})
        for member in members:
            patch = {"metadata": {"annotations": {TERMINATION_MESSAGE: message}}}
            self.cluster.core.patch_namespaced_pod(member["metadata"]["name"], NAMESPACE, patch, _preload_content=False)


def resume_step_of(pod: dict[str, Any]) -> int:
    """``GANG_RESUME_STEP`` of the member's trainer container (0 without it: a fresh start)."""
    for variable in pod["spec"]["containers"][0].get("env") or ():
        if variable.get("name") == "GANG_RESUME_STEP":
            return int(variable["value"])
    return 0
