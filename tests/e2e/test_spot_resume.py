"""A real PyTorch DDP job (2 ranks, gloo on CPU, the local-process kubelet) on spot nodes, preempted
mid-run twice through the emulator's spot preemption (taint, notice, SIGTERM/SIGKILL, node deleted):
the ladder ``RetryAsIs(times=1)`` keeps try 2 on spot, ``OnDemand()`` moves try 3 off it; each later
try resumes from the checkpoint the one before reported through its termination message (its first
step is that step + 1 and the loss carries on), and the summary shows the GPU-hours lost to the
preemptions and saved by resuming. The first preemption leaves no grace (the work since the last
periodic checkpoint is lost), the second 15 s (rank 0 saves on SIGTERM: nothing is lost)."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch  # noqa: F401  # the members import it: a test dependency, so a broken install fails here

from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs
from demo.cluster import free_port
from gang_sim.testing.eventually import eventually
from gang_sim.world.scenario import parse_scenario
from tests.e2e.gang_dags import gang_dag, summary_of, task_instance

TRAINER = Path(__file__).resolve().parents[2] / "dags" / "trainer" / "ddp_train.py"
IMAGE = "local/ddp-trainer:spot"
SPOT_LABEL = "cloud.google.com/gke-spot"
STEPS, EVERY = 20, 5


def pool(name: str, *, spot: bool, initial: int) -> dict[str, Any]:
    """Nodes of 2 GPUs: both ranks (1 GPU each) share one node, so one preemption stops both."""
    return {
        "name": name,
        "zone": "zone-a",
        "gpuType": "nvidia-l4",
        "gpusPerNode": 2,
        "cpu": "8",
        "memory": "32Gi",
        "initialNodes": initial,
        "maxNodes": 2,
        "provisioningDelaySeconds": 20,
        "spot": spot,
    }


SCENARIO = parse_scenario(
    {
        "name": "spot-resume",
        "zones": {"zone-a": {"gpuQuota": 16}},
        "localProcessImages": [IMAGE],
        "nodePools": [
            {"name": "cpu", "zone": "zone-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1, "maxNodes": 1},
            pool("l4-spot", spot=True, initial=1),
            pool("l4", spot=False, initial=1),
        ],
    }
)


class Preempter(threading.Thread):
    """Outside the code under test, as Compute Engine would: once rank 0 of try ``attempt`` logs step
    ``step``, preempt the node it runs on, giving its pods ``grace`` simulated seconds between SIGTERM
    and SIGKILL (0: no time to save, the try keeps its last periodic checkpoint)."""

    def __init__(self, cluster: Any, after: list[tuple[int, int, float]]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.after, self.preempted, self.error = cluster, after, [], None

    def rank_0(self, attempt: int) -> dict[str, Any] | None:
        return next(
            (
                item
                for item in self.cluster.objects("v1/pods")
                if f"-t{attempt}-" in item["metadata"]["name"] and item["metadata"]["name"].endswith("-0")
            ),
            None,
        )

    def logged_step(self, pod: dict[str, Any]) -> int:
        store = self.cluster.store
        text = self.cluster.run(lambda: store.logs.read("default", pod["metadata"]["name"], "trainer"))
        steps = [int(found) for found in re.findall(r"^step (\d+) ", text, re.MULTILINE)]
        return max(steps, default=0)

    def run(self) -> None:
        try:
            for attempt, step, grace in self.after:
                pod = eventually(
                    lambda attempt=attempt: self.rank_0(attempt),
                    timeout=120,
                    what=f"rank 0 of try {attempt}",
                    interval=0.05,
                )
                eventually(
                    lambda pod=pod, step=step: self.logged_step(pod) >= step,
                    timeout=120,
                    what=f"try {attempt} at step {step}",
                    interval=0.05,
                )
                node = (self.rank_0(attempt) or pod)["spec"]["nodeName"]  # bound by now: it logged
                self.preempted += self.cluster.preempt(node, notice_seconds=60, pod_grace_period_seconds=grace)
        except BaseException as error:  # reported by the test
            self.error = error


def rank_0_steps(task_log: str) -> list[list[tuple[int, float]]]:
    """Per try, the ``(step, loss)`` lines rank 0 logged, from the task log's ``[rank 0]`` lines."""
    tries: list[list[tuple[int, float]]] = []
    for line in task_log.splitlines():
        if "[rank 0] try " in line and " starts at step " in line:
            tries.append([])
        found = re.search(r"\[rank 0\] step (\d+) loss ([\d.]+)", line)
        if found and tries:
            tries[-1].append((int(found.group(1)), float(found.group(2))))
    return tries


@pytest.mark.timeout(400)
def test_a_preempted_spot_job_resumes_from_its_checkpoint_and_counts_the_gpu_hours(
    cluster_factory: Any,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(dataclasses.replace(SCENARIO), time_scale=10)
    placed: dict[int, set[str]] = {1: set(), 2: set(), 3: set()}

    def record(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        found = re.search(r"-t(\d+)-", obj["metadata"]["name"]) if resource == "v1/pods" else None
        if found and (obj.get("spec") or {}).get("nodeName"):
            placed.setdefault(int(found.group(1)), set()).add(obj["spec"]["nodeName"])

    unsubscribe = cluster.run(lambda: cluster.store.subscribe(record))
    # try 1: SIGKILL at once (work since step 5 is lost); try 2: 15 s of grace, time to save on SIGTERM
    preempter = Preempter(cluster, after=[(1, EVERY + 2, 0), (2, 2 * EVERY + 2, 15)])
    preempter.start()
    dag = gang_dag(
        "spot_resume",
        retries=2,
        image=IMAGE,
        size=2,
        gpus=1,
        cpu="1",
        spot=True,
        command=[
            "python",
            "-u",
            str(TRAINER),
            "--steps",
            str(STEPS),
            "--checkpoint-every",
            str(EVERY),
            "--step-seconds",
            "0.3",
        ],
        checkpoint=str(tmp_path / "{{ dag.dag_id }}" / "{{ run_id }}"),
        fallbacks=[RetryAsIs(times=1), OnDemand()],
        distributed="torch",
        master_port=free_port(),
        deferrable=True,
        log_ranks=[0],
        reservation_timeout=timedelta(seconds=120),
        startup_timeout=timedelta(seconds=120),
        run_timeout=timedelta(seconds=180),
    )
    dag_run = run_dag(dag)
    cluster.run(unsubscribe)
    preempter.join(timeout=5)
    assert preempter.error is None, preempter.error
    task_log = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", task_log[-4000:]
    summary = summary_of(dag_run)

    tries = summary["tries"]
    assert [(item["step"], item["outcome"]) for item in tries] == [
        ("as configured", "spot_preempted"),
        ("retry as-is", "spot_preempted"),
        ("spot to on-demand", "all_succeeded"),
    ]
    assert len(preempter.preempted) == 2
    first, second, third = tries
    assert first["checkpoint_step"] == EVERY and first["checkpoint_progress"] > EVERY  # killed after step 5
    saved_on_sigterm = second["checkpoint_step"]
    assert second["resumed_from_step"] == EVERY
    assert saved_on_sigterm == second["checkpoint_progress"] >= 2 * EVERY + 2  # nothing after it to redo
    assert (third["resumed_from_step"], third["checkpoint_step"]) == (saved_on_sigterm, STEPS)

    logged = rank_0_steps(task_log)
    assert [steps[0][0] for steps in logged] == [1, EVERY + 1, saved_on_sigterm + 1], logged
    assert logged[-1][-1][0] == STEPS
    by_step = {step: loss for steps in logged[:2] for step, loss in steps}
    assert logged[1][0][1] == pytest.approx(by_step[EVERY + 1], abs=1e-6)  # the loss the interrupted run had
    assert logged[1][0][1] < logged[0][0][1] / 4  # not the first step's loss: training went on
    assert logged[2][0][1] < logged[0][0][1] / 4

    figures = summary["checkpoint"]
    assert figures["resumed_from_step"] == saved_on_sigterm
    assert first["gpu_hours_lost"] > 0 and first["gpu_hours_saved"] > 0
    assert second["gpu_hours_lost"] == 0 and second["gpu_hours_saved"] > 0
    assert figures["gpu_hours_lost"] == pytest.approx(first["gpu_hours_lost"], abs=1e-5)
    assert figures["gpu_hours_saved"] == pytest.approx(first["gpu_hours_saved"] + second["gpu_hours_saved"], abs=1e-5)
    assert f"saved by resuming (try 2 from step {EVERY}, try 3 from step {saved_on_sigterm})" in task_log
    spot_nodes = {
        node["metadata"]["name"]
        for node in cluster.objects("v1/nodes", namespace="")
        if (node["metadata"].get("labels") or {}).get(SPOT_LABEL) == "true"
    }
    assert placed[1] and placed[2] and placed[3], placed
    assert not placed[3] & (spot_nodes | set(preempter.preempted)), (placed, spot_nodes)
    assert placed[1] | placed[2] <= set(preempter.preempted)


WIDE = 8
WIDE_SCENARIO = parse_scenario(
    {
        "name": "spot-resume-wide",
        "zones": {"zone-a": {"gpuQuota": 32}},
        "localProcessImages": [IMAGE],
        "nodePools": [
            {"name": "cpu", "zone": "zone-a", "cpu": "8", "memory": "32Gi", "initialNodes": 1, "maxNodes": 1},
            *(
                {
                    "name": name,
                    "zone": "zone-a",
                    "gpuType": "nvidia-l4",
                    "gpusPerNode": 1,  # one member per node
                    "cpu": "2",
                    "memory": "4Gi",
                    "initialNodes": WIDE,
                    "maxNodes": WIDE,
                    "provisioningDelaySeconds": 20,
                    "spot": spot,
                }
                for name, spot in (("l4-spot", True), ("l4", False))
            ),
        ],
    }
)


@pytest.mark.timeout(400)
def test_an_8_rank_gang_resumes_from_rank_0_when_a_non_zero_ranks_node_is_reclaimed(
    cluster_factory: Any,
    run_dag: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory(dataclasses.replace(WIDE_SCENARIO), time_scale=10)
    steps, every = 12, 4

    class ReclaimRank3(Preempter):
        """Reclaims rank 3's node (not rank 0's) once rank 0 of try 1 logged step ``every + 2``."""

        def run(self) -> None:
            try:
                pod = eventually(lambda: self.rank_0(1), timeout=180, what="rank 0 of try 1", interval=0.05)
                eventually(lambda: self.logged_step(pod) >= every + 2, timeout=180, what="step", interval=0.05)
                rank_3 = next(
                    item
                    for item in self.cluster.objects("v1/pods")
                    if "-t1-" in item["metadata"]["name"] and item["metadata"]["name"].endswith("-3")
                )
                rank_0_node = (self.rank_0(1) or pod)["spec"]["nodeName"]  # bound by now: it logged
                assert rank_3["spec"]["nodeName"] != rank_0_node
                self.preempted += self.cluster.preempt(
                    rank_3["spec"]["nodeName"], notice_seconds=60, pod_grace_period_seconds=0
                )
            except BaseException as error:  # reported by the test
                self.error = error

    preempter = ReclaimRank3(cluster, after=[])
    preempter.start()
    dag = gang_dag(
        "spot_resume_wide",
        retries=1,
        image=IMAGE,
        size=WIDE,
        gpus=1,
        cpu="1",
        memory="256Mi",
        spot=True,
        command=[
            "python",
            "-u",
            str(TRAINER),
            "--steps",
            str(steps),
            "--checkpoint-every",
            str(every),
            "--step-seconds",
            "0.3",
        ],
        checkpoint=str(tmp_path / "{{ dag.dag_id }}" / "{{ run_id }}"),
        fallbacks=[OnDemand()],
        distributed="torch",
        master_port=free_port(),
        deferrable=True,
        log_ranks=[0],
        reservation_timeout=timedelta(seconds=120),
        startup_timeout=timedelta(seconds=180),
        run_timeout=timedelta(seconds=240),
    )
    dag_run = run_dag(dag)
    preempter.join(timeout=5)
    assert preempter.error is None, preempter.error
    task_log = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", task_log[-4000:]
    first, second = summary_of(dag_run)["tries"]
    assert (first["outcome"], second["outcome"]) == ("spot_preempted", "all_succeeded")
    assert first["checkpoint_step"] >= every  # rank 0's report, read although its node was not reclaimed
    assert second["resumed_from_step"] == first["checkpoint_step"]
    logged = rank_0_steps(task_log)
    # Try 1's rank 0 was drained (stopped and removed) before the operator copied logs: its log is the
    # tail the run trigger read before stopping it, carried in the event.
    assert "[rank 0] (rank 0: read before its pod was removed)" in task_log, task_log[-4000:]
    assert "rank 0: log unavailable" not in task_log
    assert len(logged) == 2 and logged[0][0][0] == 1 and logged[0][-1][0] >= every + 2, logged
    # try 2 starts after rank 0's checkpoint
    assert logged[-1][0][0] == first["checkpoint_step"] + 1, logged
    assert logged[-1][-1][0] == steps
    assert not cluster.objects("v1/pods")  # nothing left behind
