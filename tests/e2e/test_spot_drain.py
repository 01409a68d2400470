"""Spot resume when a rank other than 0 loses its node: the try ends ``spot_preempted`` while rank 0 -
the rank that saves and reports - still runs on a healthy node. The run trigger stops it (SIGTERM and
its grace period, through the kubelet of the emulator) and reads the checkpoint report it writes on
SIGTERM, so try 2 resumes from that step and rank 0 loads the checkpoint.

Members are ``python:3.11-slim`` local processes running a stdlib trainer (``checkpoint_trainer.py``):
rank 0 saves every 5 steps and reports after every step and on SIGTERM. One member per node; a
thread outside the code under test reclaims the node of rank ``r`` (``/_sim/preemptions``) once rank
0 has saved step 10. The operator and its triggers run on the cluster's clock (10x real time).

Fault paths of the drain, injected from outside: its delete failing past the client's retries
(``/_sim/faults``), every watch cut every half second, and members that ignore SIGTERM until their
grace period ends - each ends recorded in the log and the try's record, never a silent start from
step 0.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.reservation.fallback import OnDemand, RetryAsIs
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing.eventually import eventually
from gang_sim.world.scenario import parse_scenario
from tests.e2e.gang_dags import gang_dag, summary_of, task_instance

TRAINER = Path(__file__).resolve().parent / "checkpoint_trainer.py"
IMAGE = "python:3.11-slim"
SAVED_BEFORE_RECLAIM = 10
TRAINING = ("--steps", "30", "--every", "5", "--step-seconds", "0.1")
"""Rank 0 saves step 10 a second after it starts; the reclaim and the drain take well under the 2 s left."""
QUICK_RETRIES = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1}


def scenario(size: int) -> Any:
    """One GPU per node: every member on a node of its own; one spare spot node for try 2."""

    def pool(name: str, spot: bool) -> dict[str, Any]:
        return {
            "name": name,
            "zone": "zone-a",
            "gpuType": "nvidia-l4",
            "gpusPerNode": 1,
            "cpu": "2",
            "memory": "4Gi",
            "initialNodes": size + 1 if spot else 0,
            "maxNodes": size + 1,
            "provisioningDelaySeconds": 10,
            "spot": spot,
        }

    return parse_scenario(
        {
            "name": f"spot-drain-{size}",
            "zones": {"zone-a": {"gpuQuota": 4 * size}},
            "localProcessImages": ["python:*"],
            "nodePools": [pool("l4-spot", True), pool("l4", False)],
        }
    )


class Reclaimer(threading.Thread):
    """Once rank 0 of try 1 has saved step 10, reclaim the node of rank ``rank`` (as Compute Engine
    would), after setting ``faults`` on the emulator if given."""

    def __init__(self, cluster: Any, checkpoints: Path, rank: int, faults: str | None, after_step: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.checkpoints, self.rank, self.faults = cluster, checkpoints, rank, faults
        self.after_step = after_step
        self.node: str | None = None
        self.error: BaseException | None = None

    def saved_step(self) -> int:
        saved = list(self.checkpoints.glob("*/checkpoint.json"))
        return int(json.loads(saved[0].read_text())["step"]) if saved else 0

    def member(self, rank: int) -> dict[str, Any] | None:
        return next(
            (
                pod
                for pod in self.cluster.objects("v1/pods")
                if "-t1-" in pod["metadata"]["name"] and pod["metadata"]["name"].endswith(f"-{rank}")
            ),
            None,
        )

    def logged_step(self) -> int:
        rank_0 = self.member(0)
        if rank_0 is None:
            return 0
        store, name = self.cluster.store, rank_0["metadata"]["name"]
        text = self.cluster.run(lambda: store.logs.read("default", name, "trainer"))
        return max((int(step) for step in re.findall(r"^rank 0: step (\d+)$", text, re.MULTILINE)), default=0)

    def run(self) -> None:
        try:
            eventually(lambda: self.saved_step() >= SAVED_BEFORE_RECLAIM, timeout=120, what="step 10", interval=0.02)
            eventually(lambda: self.logged_step() >= self.after_step, timeout=60, what="a later step", interval=0.02)
            target, rank_0 = self.member(self.rank), self.member(0)
            assert target is not None and rank_0 is not None
            assert target["spec"]["nodeName"] != rank_0["spec"]["nodeName"]
            if self.faults is not None:
                faults = Faults.parse(self.faults)
                self.cluster.run(lambda: setattr(self.cluster.emulator, "faults", faults))
            self.node = target["spec"]["nodeName"]
            self.cluster.preempt(self.node, notice_seconds=60)
        except BaseException as error:  # reported by the test
            self.error = error


def drained_run(
    cluster_factory: Any,
    run_dag: Any,
    capfd: pytest.CaptureFixture[str],
    checkpoints: Path,
    *,
    size: int,
    rank: int,
    deferrable: bool,
    trainer: tuple[str, ...] = (),
    faults: str | None = None,
    after_step: int = SAVED_BEFORE_RECLAIM,
    **operator: Any,
) -> tuple[dict[str, Any], str]:
    """Run the DAG of the issue's scenario, reclaiming rank ``rank``'s node; the summary and the task log."""
    cluster = cluster_factory(dataclasses.replace(scenario(size)), time_scale=10, cluster_time=True)
    reclaimer = Reclaimer(cluster, checkpoints, rank, faults, after_step)
    reclaimer.start()
    command = ["python", "-u", str(TRAINER), *TRAINING, *trainer]
    dag = gang_dag(
        f"spot_drain_{size}_{rank}_{'deferred' if deferrable else 'blocking'}",
        retries=3,
        size=size,
        gpus=1,
        cpu="100m",
        memory="128Mi",
        spot=True,
        checkpoint=str(checkpoints / "{{ run_id }}"),
        fallbacks=[RetryAsIs(times=2), OnDemand()],
        deferrable=deferrable,
        reservation_timeout=timedelta(minutes=10),
        startup_timeout=timedelta(minutes=10),
        run_timeout=timedelta(minutes=30),
        **({"image": IMAGE, "command": command} if "pod_template" not in operator else {}),
        **operator,
    )
    dag_run = run_dag(dag)
    reclaimer.join(timeout=10)
    assert reclaimer.error is None, reclaimer.error
    task_log = capfd.readouterr().out
    assert task_instance(dag_run).state == "success", task_log[-6000:]
    assert not cluster.objects("v1/pods"), "nothing left behind"
    return summary_of(dag_run), task_log


@pytest.fixture
def two_members(
    cluster_factory: Any, run_dag: Any, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> Callable[..., tuple[dict[str, Any], str]]:
    """The issue's gang: 2 members, deferred, rank 1's node reclaimed (:func:`drained_run` with ``options``)."""
    return functools.partial(drained_run, cluster_factory, run_dag, capfd, tmp_path, size=2, rank=1, deferrable=True)


def resumed_step(summary: dict[str, Any], task_log: str) -> int:
    """Try 2's resume step, checked against the try records, the plan line and rank 0's own line."""
    first, second = summary["tries"]
    assert (first["outcome"], second["outcome"]) == ("spot_preempted", "all_succeeded")
    step = first["checkpoint_step"]
    assert step is not None and step >= SAVED_BEFORE_RECLAIM, first
    assert second["resumed_from_step"] == step
    assert f"members resume from the checkpoint at step {step} that try 1 reported (GANG_RESUME=1)" in task_log
    assert f"[rank 0] rank 0: loaded checkpoint at step {step}" in task_log
    return int(step)


def drain_line(task_log: str) -> str:
    found = re.findall(r"Gang \S+-t1-\S+: ranks \[[\d, ]*\] stopped after [^\n]*", task_log)
    assert len(found) == 1, task_log[-6000:]
    return str(found[0])


CASES = [
    pytest.param(2, 1, True, id="2-members-rank-1-deferred"),
    pytest.param(2, 1, False, id="2-members-rank-1-blocking"),
    *(
        pytest.param(8, rank, rank % 2 == 1, id=f"8-members-rank-{rank}-{'deferred' if rank % 2 else 'blocking'}")
        for rank in range(1, 8)
    ),
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("size", "rank", "deferrable"), CASES)
def test_try_2_resumes_from_rank_0s_report_when_another_ranks_node_is_reclaimed(
    cluster_factory: Any,
    run_dag: Any,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
    size: int,
    rank: int,
    deferrable: bool,
) -> None:
    summary, task_log = drained_run(
        cluster_factory, run_dag, capfd, tmp_path, size=size, rank=rank, deferrable=deferrable, log_ranks="all"
    )
    step = resumed_step(summary, task_log)
    assert step == SAVED_BEFORE_RECLAIM or step % 5 == 0  # a periodic checkpoint: this trainer saves no other
    assert "stopping ranks [0" in task_log
    assert f"rank 0 saved step {step}" in drain_line(task_log)
    assert summary["tries"][0]["unread_reports"] == []
    assert "could not read" not in task_log


@pytest.mark.timeout(300)
def test_a_delete_failing_past_its_retries_is_recorded_and_named_by_the_next_plan(
    two_members: Callable[..., tuple[dict[str, Any], str]],
) -> None:
    summary, task_log = two_members(
        faults="delete/pods:1.0:503:count:2",  # the drain's two attempts at rank 0's delete
        client_options=QUICK_RETRIES,
    )
    first, second = summary["tries"]
    assert (first["outcome"], second["outcome"]) == ("spot_preempted", "all_succeeded")
    assert first["checkpoint_step"] is None and second["resumed_from_step"] is None
    assert [(item["rank"], item["gap"]) for item in first["unread_reports"]] == [(0, "delete_failed")]
    assert (
        "no earlier try of this run reported a checkpoint (try 1 could not read the reports of ranks [0] "
        "(not stopped: the delete failed past the client's retries)), so members start afresh (GANG_RESUME unset)"
    ) in task_log
    assert "the checkpoint report of rank 0 was not read: not stopped: the delete failed" in task_log
    assert "try 1 could not read the checkpoint reports of ranks [0]" in task_log  # the story at the end


@pytest.mark.timeout(300)
def test_watches_cut_every_half_second_do_not_lose_the_report_written_on_sigterm(
    two_members: Callable[..., tuple[dict[str, Any], str]],
) -> None:
    summary, task_log = two_members(
        trainer=("--save-on-sigterm", "--save-seconds", "1.5"),
        faults="watch-cut:0.5",
        after_step=12,
    )
    step = resumed_step(summary, task_log)
    assert step == summary["tries"][0]["checkpoint_progress"] >= 12  # saved on SIGTERM, after the periodic save
    assert "(the watch of the stopping members resumed" in drain_line(task_log)


@pytest.mark.timeout(300)
def test_members_that_ignore_sigterm_are_killed_after_their_grace_period_and_rank_0s_last_report_is_read(
    two_members: Callable[..., tuple[dict[str, Any], str]],
) -> None:
    command = ["python", "-u", str(TRAINER), *TRAINING, "--ignore-sigterm"]
    template = {
        "spec": {
            "terminationGracePeriodSeconds": 5,  # simulated seconds: half a second here
            "containers": [{"name": "trainer", "image": IMAGE, "command": command}],
        }
    }
    summary, task_log = two_members(pod_template=template)
    resumed_step(summary, task_log)
    assert summary["tries"][0]["checkpoint_progress"] > SAVED_BEFORE_RECLAIM  # it trained on through SIGTERM
    assert "ranks [0] did not stop on SIGTERM and were killed when their grace period ended (exit code 137)" in task_log
    assert summary["tries"][0]["unread_reports"] == []
