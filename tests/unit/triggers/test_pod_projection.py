"""What the shared watch caches of a member pod (``observation.trimmer``) decides exactly as the whole
pod does: every decision, classification and memory a trigger derives from its pods is the same for
the cached projection as for the pod the API server sent, for each shape the decisions read (pending,
gated, bound, running, succeeded, failed with exit codes, a fatal waiting reason, deleted, evicted,
node lost, preempted by the kubelet's node shutdown, a checkpoint report), alone and mixed in gangs.

The whole pods carry what a real API server adds (managed fields, owner references, condition
times, container images, env and resources, IPs); the seeded random gangs compose the shapes with
each other so that a field the trimmer dropped and a decision reads shows up as a difference.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.reservation import members, pod_group, shape
from airflow_provider_gang.reservation.decision import Policy, decide
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.triggers import progress, survivors
from airflow_provider_gang.triggers.observation import trimmer
from tests.builders import MemberPodBuilder, provreq, stamp

GANG = "gang-t1-abc"
GATE = "airflow-gang.io/gang-t1-abc"
SIZE = 4
NOW = 1_000.0


def as_served(pod: dict[str, Any], rank: int) -> dict[str, Any]:
    """``pod`` with what an API server and the kubelet add that no decision reads."""
    served = copy.deepcopy(pod)
    metadata = served["metadata"]
    metadata.update(
        uid=f"00000000-0000-0000-0000-00000000000{rank}",
        resourceVersion=str(100 + rank),
        creationTimestamp=stamp(0),
        generateName=f"{GANG}-",
        ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": GANG, "uid": "owner", "controller": True}],
        managedFields=[{"manager": "gang", "operation": "Update", "fieldsV1": {"f:metadata": {}}}],
    )
    metadata.setdefault("annotations", {})["autoscaling.x-k8s.io/consume-provisioning-request"] = GANG
    spec = served["spec"]
    spec.update(
        restartPolicy="Never",
        serviceAccountName="trainer",
        terminationGracePeriodSeconds=45,
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        volumes=[{"name": "data", "emptyDir": {}}],
    )
    for container in spec["containers"]:
        container.update(
            env=[{"name": "RANK", "value": str(rank)}, {"name": "WORLD_SIZE", "value": str(SIZE)}],
            resources={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}},
            command=["python", "train.py"],
        )
    status = served.setdefault("status", {})
    status.setdefault("qosClass", "Burstable")
    if spec.get("nodeName"):
        status.update(hostIP="10.0.0.1", podIP=f"10.1.0.{rank}")
    for condition in status.get("conditions") or ():
        condition.setdefault("lastProbeTime", None)
    for container in status.get("containerStatuses") or ():
        container.update(image="trainer:1", imageID="sha256:0", ready=False, restartCount=0)
    return served


SHAPES: dict[str, Callable[[MemberPodBuilder], MemberPodBuilder]] = {
    "pending": lambda pod: pod,
    "gated": lambda pod: pod.gated(GATE).condition("PodScheduled", "False", "SchedulingGated", "gated"),
    "gated-by-two": lambda pod: pod.gated("kueue.x-k8s.io/admission").gated(GATE),
    "unschedulable": lambda pod: pod.condition("PodScheduled", "False", "Unschedulable", "0/3 nodes"),
    "bound": lambda pod: pod.bound("node-2").condition("PodScheduled", "True", at=5),
    "running": lambda pod: pod.container_running(),
    "succeeded": lambda pod: pod.succeeded(at=200),
    "failed-exit-1": lambda pod: pod.failed(1, "Error"),
    "failed-oom": lambda pod: pod.failed(137, "OOMKilled", at=70),
    "failed-without-status": lambda pod: pod.phase("Failed", "Error", "container exited"),
    "image-unusable": lambda pod: pod.bound().waiting("InvalidImageName"),
    "config-missing": lambda pod: pod.bound().waiting("CreateContainerConfigError"),
    "deleted": lambda pod: pod.container_running().terminating(),
    "evicted": lambda pod: pod.running().phase("Failed", "Evicted", "The node was low on memory."),
    "node-lost": lambda pod: pod.running().phase("Unknown"),
    "disrupted": lambda pod: pod.running().condition("DisruptionTarget", reason="PreemptionByScheduler"),
    "spot-shutting-down": lambda pod: pod.on_spot().shutting_down(),
    "spot-shut-down": lambda pod: pod.on_spot().shut_down(),
    "checkpoint-report": lambda pod: pod.running().terminated(
        0, "Completed", message='{"checkpoint_step": 120, "progress": 0.4}'
    ),
    "checkpoint-malformed": lambda pod: pod.running().terminated(1, "Error", message="{not json"),
}


def served_pod(shape_name: str, rank: int | None, *, grace: int | None = None) -> dict[str, Any]:
    pod = as_served(SHAPES[shape_name](MemberPodBuilder(rank, GANG)).obj(), rank or 0)
    if grace is not None:
        pod["metadata"]["deletionGracePeriodSeconds"] = grace
    return pod


def projected(pods: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    trim = trimmer(PODS.key)
    return tuple(trim(copy.deepcopy(pod)) for pod in pods)


def everything_read(pods: Sequence[dict[str, Any]], *, size: int = SIZE) -> dict[str, Any]:
    """All a trigger derives from its pods, in every mode and stage that reads them."""
    request = provreq(GANG).accepted().provisioned().obj()
    group = {"metadata": {"name": GANG, "namespace": "ml"}, "spec": {"schedulingPolicy": {"gang": {}}}}
    policy = Policy(deadline=NOW + 60, startup_deadline=NOW + 30)
    read: dict[str, Any] = {
        "shape": [shape.malformed("Pod", pod) for pod in pods],
        "ranks": [members.member_rank(pod) for pod in pods],
        "members": members.members_by_rank(pods, size=size),
        "run": members.classify_running_gang(pods, size=size),
        "run-from-job": members.classify_running_gang(pods, size=size, missing_is_lost=False),
        "gates": members.classify_gated_pods(pods, size=size, gate=GATE),
        "spot": members.spot_preemption(pods, size=size, nodes_shutting_down=frozenset({"node-1"})),
        "spot-nodes": members.spot_nodes(pods, size=size),
        "stopping": [members.is_stopping(pod) for pod in pods],
        "pod-group": pod_group.reservation_decision(group, pods, size=size),
        "survivors": [pod["metadata"]["name"] for pod in survivors.survivors(pods)],
        "grace": [survivors.grace_seconds(pod) for pod in pods],
        "uids": [pod["metadata"].get("uid") for pod in pods],
    }
    for mode, stage in (
        (ReservationMode.GATES, Stage.RESERVATION),
        (ReservationMode.WORKLOAD, Stage.RESERVATION),
        (ReservationMode.PROVISIONING_REQUEST, Stage.RUN),
        (ReservationMode.GATES, Stage.RUN),
        (ReservationMode.WORKLOAD, Stage.RUN),
    ):
        observed = Observed(
            mode=mode,
            stage=stage,
            size=size,
            started_at=0.0,
            provisioning_request=request if mode is not ReservationMode.WORKLOAD else None,
            pod_group=group if mode is ReservationMode.WORKLOAD else None,
            pods=tuple(pods),
            scheduling_gate=GATE if mode is ReservationMode.GATES else None,
        )
        memory = RunMemory(read_checkpoints=stage is Stage.RUN)
        remembered, warnings = memory.see(observed)
        read[f"{mode.value}/{stage.value}"] = (
            decide(remembered, now=NOW, policy=policy),
            decide(remembered, now=NOW + 90, policy=policy),
            remembered.spot_preempted_ranks,
            memory.checkpoint,
            warnings,
            progress.reservation_conditions(remembered),
        )
    return read


@pytest.mark.parametrize("shape_name", sorted(SHAPES))
def test_one_member_of_each_shape_reads_the_same_projected_as_whole(shape_name):
    pods = [served_pod(shape_name, 0, grace=10 if shape_name == "deleted" else None)]
    assert everything_read(projected(pods), size=1) == everything_read(pods, size=1)


@pytest.mark.parametrize("shape_name", sorted(SHAPES))
def test_a_gang_of_one_shape_beside_gated_members_reads_the_same_projected_as_whole(shape_name):
    pods = [served_pod(shape_name, 0), *(served_pod("gated", rank) for rank in range(1, SIZE))]
    assert everything_read(projected(pods)) == everything_read(pods)


@pytest.mark.parametrize("seed", range(200))
def test_random_gangs_of_mixed_shapes_read_the_same_projected_as_whole(seed):
    """Seeded (replayable by its id): members of random shapes, some ranks missing or doubled (a
    replaced pod), some without a rank label or with the Job's completion index instead."""
    chance = random.Random(seed)
    pods = []
    for rank in range(SIZE):
        for _ in range(chance.choice((0, 1, 1, 1, 2))):
            pod = served_pod(chance.choice(sorted(SHAPES)), rank)
            if chance.random() < 0.1:  # a Job's pod: the completion index names the rank
                labels = pod["metadata"]["labels"]
                index = labels.pop(members.RANK_LABEL, "0")
                where = chance.choice(("labels", "annotations"))
                pod["metadata"].setdefault(where, {})[members.JOB_COMPLETION_INDEX] = index
            if chance.random() < 0.05:
                pod["metadata"]["labels"].pop(members.RANK_LABEL, None)
            pod["metadata"]["name"] = f"{pod['metadata']['name']}-{len(pods)}"
            pods.append(pod)
    chance.shuffle(pods)
    assert everything_read(projected(pods)) == everything_read(pods)


def test_a_dropped_field_a_decision_reads_would_show_as_a_difference():
    """The comparison can fail: the projection without the node name a bound member has reads
    differently (guards the tests above against comparing nothing)."""
    pods = [served_pod("bound", rank) for rank in range(SIZE)]
    without_node = [
        {**pod, "spec": {key: value for key, value in pod["spec"].items() if key != "nodeName"}}
        for pod in projected(pods)
    ]
    assert everything_read(without_node) != everything_read(pods)


def test_the_projection_keeps_nothing_of_containers_but_their_names_and_is_smaller():
    pod = served_pod("running", 0)
    kept = trimmer(PODS.key)(copy.deepcopy(pod))
    assert kept["spec"]["containers"] == [{"name": "worker"}]
    assert "managedFields" not in kept["metadata"] and "ownerReferences" not in kept["metadata"]
    assert kept["status"]["containerStatuses"] == pod["status"]["containerStatuses"]
    assert all("lastTransitionTime" not in condition for condition in kept["status"].get("conditions") or ())
