"""The run trigger's drain of a gang's running members (``triggers.survivors``) on the emulator, whose
kubelet stops a deleted pod within its grace period and writes its terminated status before it
removes it: a member that saves on SIGTERM has its report read; one that ignores SIGTERM is killed
when its grace period ends and its last report is read; one that outlives the drain's wait (a
kubelet slower than promised) is given up on. The log ranks' tails are read before the members are
stopped. Faults injected from outside (the emulator's ``/_sim/faults``, a force delete by someone
else): a delete failing past its retries, watches cut or reset, a 410 that makes the watch start
over, a pod removed before its terminated state was seen - each ends with what was read and the
unread ranks recorded with why, never silently."""

from __future__ import annotations

import asyncio
import functools
import textwrap
from typing import Any

import pytest
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.checkpoint import CheckpointReport
from airflow_provider_gang.reservation.member_history import RunMemory
from airflow_provider_gang.reservation.naming import RANK_LABEL
from airflow_provider_gang.reservation.unread_reports import ReportGap
from airflow_provider_gang.triggers.survivors import MARGIN_SECONDS, Drain, describe_reports
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing.eventually import eventually
from gang_sim.testing.harness import ClusterHarness
from gang_sim.world.scenario import load_scenario

SELECTOR = "gang.test/name=drained"
SAVES_ON_SIGTERM = """
import json, os, signal, sys, time
path = os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"]
def stop(signum, frame):
    time.sleep(SAVE_SECONDS)  # saving the checkpoint
    with open(path, "w") as file:
        file.write(json.dumps({"checkpoint_step": 12, "step": 12}))
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
with open(path, "w") as file:
    file.write(json.dumps({"checkpoint_step": 10, "step": 11}))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""
IGNORES_SIGTERM = """
import json, os, signal, time
fd = os.open(os.environ["GANG_SIM_TERMINATION_MESSAGE_PATH"], os.O_WRONLY)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
step = 0
while True:  # a report after every step, as a trainer that never learns it is being stopped
    step += 1
    # one write of a fixed width over the last (no truncation): a SIGKILL leaves one or the other
    os.pwrite(fd, json.dumps({"checkpoint_step": 10, "step": 10 + step}).ljust(64).encode(), 0)
    time.sleep(0.05)
"""
QUICK_RETRIES = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.01)


def saves_on_sigterm(save_seconds: float = 0.0) -> str:
    return SAVES_ON_SIGTERM.replace("SAVE_SECONDS", repr(save_seconds))


def _member(rank: int, code: str, grace: int) -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "python:3.11-slim",
        "command": ["python", "-c", textwrap.dedent(code)],
        "resources": {"requests": {"cpu": "100m"}},
    }
    return {
        "metadata": {"name": f"drained-{rank}", "labels": {"gang.test/name": "drained", RANK_LABEL: str(rank)}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace, "containers": [container]},
    }


def _start(cluster: ClusterHarness, *members: dict[str, Any]) -> list[dict[str, Any]]:
    """Create ``members`` and wait until each printed "ready"; their pods."""
    for member in members:
        cluster.create("v1/pods", member, namespace="default")

    def ready(name: str) -> bool:
        return "ready" in cluster.run(lambda: cluster.store.logs.read("default", name, "trainer"))

    for member in members:
        name = member["metadata"]["name"]
        eventually(functools.partial(ready, name), timeout=30, what=f"{name} running", interval=0.1)
    return cluster.objects("v1/pods")


def _set_faults(cluster: ClusterHarness, spec: str) -> None:
    """Inject ``spec`` (``/_sim/faults`` syntax) from now on."""
    faults = Faults.parse(spec)
    cluster.run(lambda: setattr(cluster.emulator, "faults", faults))


class Lines:
    """A trigger's log, kept as formatted lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, event: str, *args: Any) -> None:
        self.lines.append(event % args)

    def warning(self, event: str, *args: Any) -> None:
        self.lines.append("WARNING " + event % args)


def _drain(
    cluster: ClusterHarness,
    pods: list[dict[str, Any]],
    *,
    log_ranks: tuple[int, ...] = (),
    margin: float = MARGIN_SECONDS,
    retry: RetryPolicy | None = None,
) -> tuple[Drain, RunMemory, list[str]]:
    kubeconfig = yaml.safe_load(cluster.kubeconfig_path.read_text())
    memory, log = RunMemory(), Lines()
    drain: Drain | None = None

    async def run() -> None:
        nonlocal drain
        options = {} if retry is None else {"retry": retry}
        async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig), **options) as client:
            drain = Drain(client, "default", SELECTOR, memory, log, "drained", log_ranks=log_ranks, margin=margin)
            await drain.run(pods)

    asyncio.run(asyncio.wait_for(run(), timeout=60))
    assert drain is not None
    return drain, memory, log.lines


def _unread(drain: Drain) -> list[tuple[int | None, ReportGap]]:
    return sorted((item.rank, item.gap) for item in drain.unread)


def test_survivors_report_on_sigterm_and_one_that_outlives_the_wait_is_recorded_unread() -> None:
    # The emulator's clock is manual: its kubelet never reaches the grace period until advanced, so
    # rank 1 outlives the drain's wait (1 s + 0.5 s margin of real time) - a kubelet slower than promised.
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = _start(cluster, _member(0, saves_on_sigterm(), grace=1), _member(1, IGNORES_SIGTERM, grace=1))
        drain, memory, lines = _drain(cluster, pods, margin=0.5)
        assert memory.checkpoint is not None
        assert (memory.checkpoint.rank, memory.checkpoint.step, memory.checkpoint.progress) == (0, 12, 12)
        assert "stopping ranks [0, 1]" in lines[0]
        assert "ranks [0] stopped after" in lines[1] and "rank 0 saved step 12 (it had done step 12)" in lines[1]
        assert _unread(drain) == [(1, ReportGap.NOT_SEEN_STOPPED)]
        assert lines[2].startswith("WARNING Gang drained: the checkpoint report of rank 1 was not read: not seen")
        assert "waited 1.5 s: the longest grace period 1 s + 0.5 s" in lines[2]

        def names() -> set[str]:
            return {item["metadata"]["name"] for item in cluster.objects("v1/pods")}

        assert names() == {"drained-1"}  # marked for deletion, its grace period not over on the cluster
        cluster.advance(2)
        eventually(lambda: not names(), timeout=30, what="rank 1 removed after SIGKILL")


def test_a_member_that_ignores_sigterm_is_killed_when_its_grace_period_ends_and_its_last_report_is_read() -> None:
    with ClusterHarness(load_scenario("small"), time_scale=10) as cluster:
        pods = _start(cluster, _member(0, IGNORES_SIGTERM, grace=3))
        drain, memory, lines = _drain(cluster, pods)
        assert memory.checkpoint is not None and (memory.checkpoint.rank, memory.checkpoint.step) == (0, 10)
        assert memory.checkpoint.progress > 10  # the report it wrote last, after steps done during its grace period
        assert drain.killed == [0] and not drain.unread
        assert "WARNING Gang drained: ranks [0] did not stop on SIGTERM and were killed" in lines[2]
        assert "(exit code 137)" in lines[2]


def _two_saving_members(cluster: ClusterHarness, save_seconds: float = 0.0) -> list[dict[str, Any]]:
    return _start(cluster, *(_member(rank, saves_on_sigterm(save_seconds), grace=30) for rank in (0, 1)))


@pytest.mark.parametrize("log_fault", [None, "get/pods/log:1.0:500"], ids=["logs-readable", "log-reads-fail"])
def test_the_log_ranks_tails_are_saved_before_the_members_are_stopped(log_fault: str | None) -> None:
    with ClusterHarness(load_scenario("small"), faults=log_fault) as cluster:
        pods = _two_saving_members(cluster)
        drain, memory, _ = _drain(cluster, pods, log_ranks=(0,))
        if log_fault is None:
            assert list(drain.saved_logs) == [0]  # rank 1 is not a log rank
            assert "ready" in drain.saved_logs[0]
        else:
            assert drain.saved_logs == {}
        assert memory.checkpoint is not None and memory.checkpoint.step == 12  # stopped and read all the same
        eventually(lambda: not cluster.objects("v1/pods"), timeout=30, what="both members removed")


def test_a_delete_failing_past_its_retries_leaves_the_members_running_and_records_them_unread() -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = _two_saving_members(cluster)
        _set_faults(cluster, "delete/pods:1.0:503")
        drain, memory, lines = _drain(cluster, pods, retry=QUICK_RETRIES)
        assert _unread(drain) == [(0, ReportGap.DELETE_FAILED), (1, ReportGap.DELETE_FAILED)]
        assert all("ServiceUnavailable" in item.detail or "503" in item.detail for item in drain.unread), drain.unread
        assert memory.checkpoint is None and not drain.stopped
        assert "checkpoint reports read: none" in lines[1]
        assert "the checkpoint report of rank 0 was not read: not stopped: the delete failed" in lines[2]
        assert not any(item["metadata"].get("deletionTimestamp") for item in cluster.objects("v1/pods"))


@pytest.mark.parametrize("fault", ["watch-cut:0.3", "watch/pods:1.0:reset:count:2"], ids=["watch-cut", "watch-reset"])
def test_a_cut_watch_resumes_and_the_reports_are_read(fault: str) -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = _two_saving_members(cluster, save_seconds=1.0)  # the drain outlives a few cuts
        _set_faults(cluster, fault)
        drain, memory, lines = _drain(cluster, pods)
        assert not drain.unread and set(drain.stopped) == {0, 1}
        assert memory.checkpoint is not None and memory.checkpoint.step == 12
        assert "(the watch of the stopping members resumed" in lines[-1], lines
        if "reset" in fault:
            assert any(
                line.startswith("WARNING Gang drained: the watch of its stopping members failed") for line in lines
            )


def _force_deleted_when_marked(cluster: ClusterHarness) -> None:
    """Someone else force-deletes (grace 0) every member as soon as it is marked for deletion."""
    store = cluster.store

    def on_change(event_type: str, resource: str, obj: dict[str, Any]) -> None:
        metadata = obj["metadata"]
        if resource == "v1/pods" and event_type == "MODIFIED" and metadata.get("deletionGracePeriodSeconds"):
            delete = functools.partial(store.delete, "v1/pods", metadata["name"], "default", grace_period_seconds=0)
            asyncio.get_running_loop().call_soon(delete)

    cluster.run(lambda: store.subscribe(on_change))


@pytest.mark.parametrize("expire", [False, True], ids=["watched", "watch-starts-over"])
def test_a_member_removed_before_its_terminated_state_was_seen_is_recorded(expire: bool) -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = _start(cluster, _member(0, IGNORES_SIGTERM, grace=30))
        _force_deleted_when_marked(cluster)
        if expire:  # every watch is answered 410: the drain sees the removal only by listing again
            _set_faults(cluster, "watch-expire:1.0")
        drain, _, lines = _drain(cluster, pods)
        (unread,) = drain.unread
        assert (unread.rank, unread.gap) == (0, ReportGap.GONE_UNSEEN)
        expected = "410 Gone" if expire else "removed before its terminated state was seen"
        assert expected in unread.detail, unread
        assert "the checkpoint report of rank 0 was not read: the pod was removed" in lines[-1]


def test_a_survivor_gone_before_the_drain_is_recorded_and_the_others_are_read() -> None:
    with ClusterHarness(load_scenario("small")) as cluster:
        pods = _two_saving_members(cluster)
        cluster.run(lambda: cluster.store.delete("v1/pods", "drained-1", "default", grace_period_seconds=0))
        drain, memory, _ = _drain(cluster, pods)
        assert [(item.rank, item.gap, item.detail) for item in drain.unread] == [
            (1, ReportGap.GONE_UNSEEN, "gone before it could be stopped")
        ]
        assert memory.checkpoint is not None and memory.checkpoint.rank == 0 and drain.stopped == [0]


def test_no_survivors_no_requests() -> None:
    memory = RunMemory()
    finished = [{"metadata": {"name": "m-0", "uid": "u"}, "status": {"phase": "Succeeded"}}]

    async def drain() -> None:
        await Drain(None, "default", SELECTOR, memory, Lines(), "g").run(finished)  # type: ignore[arg-type]

    asyncio.run(drain())
    assert memory.checkpoint is None


def test_the_reports_read_are_told_once_per_step_and_progress_with_the_ranks_as_runs() -> None:
    reports = {rank: CheckpointReport(step=0, progress=10, rank=rank) for rank in (7, 1, 2, 3, 4, 6)}
    reports[0] = CheckpointReport(step=10, progress=10, rank=0)
    reports[None] = CheckpointReport(step=0, progress=10)
    assert describe_reports(reports) == (
        "rank 0 saved step 10 (it had done step 10); "
        "ranks 1-4, 6-7 and 1 member without a rank saved step 0 (they had done step 10)"
    )
    assert describe_reports({}) == ""
