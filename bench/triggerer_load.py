"""Triggerer load: N gangs of 8 waiting in one process, per reservation mode, against the anchor.

For every mode (``provisioning_request``, ``kueue``, ``gates``) and every N of ``--gangs``:

1. a fresh emulator (``gang-sim serve``, a process of its own, no controllers) gets N gangs whose
   reservations stay unanswered: owner ConfigMap + PodTemplate + ProvisioningRequest without
   conditions (``provisioning_request``), the same plus 8 gated member pods (``gates``), owner
   ConfigMap + a Kueue Workload that is not admitted (``kueue``);
2. a child process, measured alone, starts N ``ReservationTrigger``s (production defaults: 5-minute
   watches, one-hour deadline) and waits until every one watches; then, for ``--window`` seconds of
   real time: Kubernetes API requests (the emulator's ``/_sim/metrics``), CPU time of the process
   over wall time (share of one core), TCP connections the process holds open to the emulator;
   peak RSS growth is the highest RSS sampled (every 0.25 s, from before the first trigger to the
   end) minus the RSS before the first trigger was built;
3. reaction: the reservations of ``--flips`` gangs are granted 50 ms apart (ProvisioningRequest
   ``Provisioned=True``, Workload ``QuotaReserved`` + ``Admitted``); each reaction runs from just
   before the status write is sent to the moment that gang's trigger yields its event.

The anchor, measured in the same run for every N of ``--anchor-gangs`` (where it saturates one core):
N x 8 cncf ``KubernetesPodTrigger``s (operator defaults, as ``bench/api_cost.py``) on N x 8 Pending
pods, measured the same way after a 10 s warm-up; its reaction runs from setting a gang's 8 pods
``Succeeded`` to the last of its 8 triggers' events.

Run: ``PYTHONPATH=. .venv/bin/python bench/triggerer_load.py [--gangs 10,100,1000,3000]
[--anchor-gangs 10,100] [--window 30] [--flips 100]``; ``--smoke`` runs 3 gangs per mode for 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="gang-bench-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

import aiohttp
import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS, POD_TEMPLATES, PODS, PROVISIONING_REQUESTS, WORKLOADS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, owner, pods, provisioning
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from bench.emulator import percentile, session_for, start_server

GANG_SIZE = 8
MODES = ("provisioning_request", "kueue", "gates")
ANCHOR = "anchor"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
TEMPLATE = {"spec": {"containers": [{"name": "base", "image": "busybox"}]}}
SETUP_IN_FLIGHT = 32
FLIP_SPACING_SECONDS = 0.05
"""Reservations are granted this far apart, each reaction measured while the others are under way."""
CHILD_TIMEOUT_SECONDS = 1800


def spec_of(mode: str, index: int) -> GangSpec:
    reservation = ReservationMode(mode)
    return GangSpec(name=f"load{index:05d}-t1-00000000", namespace="default", size=GANG_SIZE, pod_template=TEMPLATE,
                    mode=reservation, resources=MemberResources(gpus=1),
                    provisioning_class=None if reservation is ReservationMode.KUEUE else "queued-provisioning.gke.io",
                    queue="gpu" if reservation is ReservationMode.KUEUE else None)


def condition(kind: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": kind, "message": "granted by the benchmark",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# -- parent: emulator and objects -----------------------------------------------------------------

async def create_gang(client: KubeClient, mode: str, index: int) -> dict[str, Any]:
    """The objects a waiting gang of ``mode`` has; returns what its trigger needs to find them."""
    if mode == ANCHOR:
        for rank in range(GANG_SIZE):
            await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"kpo-{index}-{rank}"},
                                       "spec": TEMPLATE["spec"]})
        return {"index": index}
    spec = spec_of(mode, index)
    owner_uid = (await client.create(CONFIG_MAPS, owner.owner_config_map(spec)))["metadata"]["uid"]
    gang = {"index": index, "owner_uid": owner_uid, "workload": f"job-{spec.name}"}
    if spec.mode.uses_provisioning_request:
        await client.create(POD_TEMPLATES, provisioning.pod_template(spec, owner_uid=owner_uid))
        await client.create(PROVISIONING_REQUESTS, provisioning.provisioning_request(spec, owner_uid=owner_uid))
    if spec.mode is ReservationMode.GATES:
        for rank in range(GANG_SIZE):
            await client.create(PODS, pods.gated_pod(spec, rank, owner_uid=owner_uid))
    if spec.mode is ReservationMode.KUEUE:
        pod_set = {"name": "main", "count": GANG_SIZE, "template": pods.member_template(spec)}
        await client.create(WORKLOADS, {"apiVersion": WORKLOADS.api_version, "kind": "Workload",
                                        "metadata": {"name": gang["workload"], "labels": {JOB_UID_LABEL: owner_uid}},
                                        "spec": {"queueName": "gpu", "podSets": [pod_set]}})
    return gang


async def create_gangs(kubeconfig: dict[str, Any], mode: str, count: int) -> list[dict[str, Any]]:
    limit = asyncio.Semaphore(SETUP_IN_FLIGHT)

    async def one(client: KubeClient, index: int) -> dict[str, Any]:
        async with limit:
            return await create_gang(client, mode, index)

    async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
        return list(await asyncio.gather(*(one(client, index) for index in range(count))))


def measure(mode: str, count: int, options: argparse.Namespace) -> dict[str, Any] | None:
    """One (mode, N): a fresh emulator, the gangs, then the child process that measures; ``None`` when
    that process could not finish (its own calls timed out: the process is saturated)."""
    with tempfile.TemporaryDirectory(prefix="gang-load-") as folder:
        kubeconfig_path, gangs_path = Path(folder) / "kubeconfig", Path(folder) / "gangs.json"
        server = start_server(kubeconfig_path)
        try:
            kubeconfig = yaml.safe_load(kubeconfig_path.read_text())
            started = time.monotonic()
            gangs = asyncio.run(create_gangs(kubeconfig, mode, count))
            setup_seconds = time.monotonic() - started
            gangs_path.write_text(json.dumps(gangs))
            flips = options.anchor_flips if mode == ANCHOR else options.flips
            command = [sys.executable, __file__, "--child", mode, str(kubeconfig_path), str(gangs_path),
                       "--window", str(options.window), "--flips", str(flips)]
            child = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS,
                                   check=False, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        finally:
            server.terminate()
            server.wait(timeout=30)
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["?"])[-1]
        print(f"{mode:>20} {count:>6}  the measuring process failed ({last}): saturated", flush=True)
        return None
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return {**result, "mode": mode, "gangs": count, "setup_seconds": setup_seconds}


# -- child: what one triggerer process costs --------------------------------------------------------

def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_connections(port: int) -> int:
    """ESTABLISHED TCP connections of this process to ``port`` (``/proc/self/net/tcp*`` + fds)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        with_target = os.readlink(fd) if fd.is_symlink() else ""
        if with_target.startswith("socket:["):
            inodes.add(with_target[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                count += 1
    return count


class Control:
    """``/_sim/metrics`` over a connection closed after every request (not counted as the process's)."""

    def __init__(self, kubeconfig_path: Path) -> None:
        self.server, self.headers, self.tls = session_for(kubeconfig_path)

    async def metrics(self, method: str = "GET") -> dict[str, Any]:
        connector = aiohttp.TCPConnector(ssl=self.tls, force_close=True)
        timeout = aiohttp.ClientTimeout(total=30)
        async with (aiohttp.ClientSession(self.server, headers=self.headers, connector=connector) as session,
                    session.request(method, "/_sim/metrics", timeout=timeout) as answer):
            document: dict[str, Any] = await answer.json()
            return document


def build_triggers(mode: str, kubeconfig: dict[str, Any], gangs: list[dict[str, Any]]) -> list[Any]:
    """The triggers of ``gangs`` (Airflow is imported by the caller, before its RSS baseline)."""
    from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger

    from airflow_provider_gang.triggers.reservation import ReservationTrigger

    connection = ConnectionSettings(kubeconfig=kubeconfig).to_dict()
    if mode == ANCHOR:
        return [KubernetesPodTrigger(pod_name=f"kpo-{gang['index']}-{rank}", pod_namespace="default",
                                     trigger_start_time=datetime.datetime.now(datetime.timezone.utc),
                                     base_container_name="base", kubernetes_conn_id=None, connection_extras={},
                                     config_dict=kubeconfig, get_logs=False, startup_timeout=3600,
                                     schedule_timeout=3600)
                for gang in gangs for rank in range(GANG_SIZE)]
    triggers = []
    for gang in gangs:
        spec = spec_of(mode, gang["index"])
        names = naming.GangNames(spec.name)
        triggers.append(ReservationTrigger(
            connection=connection, gang_name=spec.name, namespace="default", deadline=time.time() + 3600,
            mode=mode, size=GANG_SIZE, started_at=time.time(),
            provisioning_request=names.provisioning_request if spec.mode.uses_provisioning_request else None,
            workload_selector=f"{JOB_UID_LABEL}={gang['owner_uid']}" if spec.mode is ReservationMode.KUEUE else None,
            pod_selector=common.member_selector(spec) if spec.mode is ReservationMode.GATES else None,
            scheduling_gate=names.scheduling_gate if spec.mode is ReservationMode.GATES else None))
    return triggers


async def grant(client: KubeClient, mode: str, gang: dict[str, Any]) -> None:
    """What the controllers write when the gang's wait is over: its trigger reacts to this."""
    status: dict[str, Any]
    if mode == ANCHOR:
        status = {"phase": "Succeeded", "containerStatuses": [{"name": "base", "ready": False, "restartCount": 0,
                  "image": "busybox", "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        await asyncio.gather(*(client.patch(PODS, f"kpo-{gang['index']}-{rank}", {"status": status},
                                            subresource="status") for rank in range(GANG_SIZE)))
    elif mode == "kueue":
        admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": GANG_SIZE}]}
        status = {"conditions": [condition("QuotaReserved"), condition("Admitted")], "admission": admission}
        await client.patch(WORKLOADS, gang["workload"], {"status": status}, subresource="status")
    else:
        name = naming.GangNames(spec_of(mode, gang["index"]).name).provisioning_request
        status = {"conditions": [condition("Accepted"), condition("Provisioned")]}
        await client.patch(PROVISIONING_REQUESTS, name, {"status": status}, subresource="status")


async def child(mode: str, kubeconfig_path: Path, kubeconfig: dict[str, Any], gangs: list[dict[str, Any]],
                window: float, flips: int) -> dict[str, Any]:
    """Run the triggers of ``gangs`` in this process and measure it (module docstring, steps 2 and 3)."""
    port = int(kubeconfig["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])
    control = Control(kubeconfig_path)
    build_triggers(mode, kubeconfig, gangs[:1])  # imports Airflow and the triggers before the baseline
    await control.metrics()  # and aiohttp's TLS machinery
    baseline, peak = rss_bytes(), rss_bytes()

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_bytes())
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    triggers = build_triggers(mode, kubeconfig, gangs)
    fired: dict[int, float] = {}

    async def wait(position: int, trigger: Any) -> None:
        events = trigger.run()
        try:
            await anext(events)
            fired[position] = time.monotonic()
        finally:
            await events.aclose()
            await trigger.cleanup()

    await control.metrics("DELETE")
    started = time.monotonic()
    tasks = [asyncio.create_task(wait(position, trigger)) for position, trigger in enumerate(triggers)]
    if mode == ANCHOR:
        await asyncio.sleep(10.0)
    else:
        while not all(t.reflectors and all(r.stats.watches for r in t.reflectors) for t in triggers):
            if any(task.done() for task in tasks) or time.monotonic() - started > 600:
                raise RuntimeError("triggers ended or did not all start watching")
            await asyncio.sleep(0.1)
    startup = {"seconds": time.monotonic() - started, "requests": (await control.metrics("DELETE"))["total"]}
    cpu_before, wall_before = time.process_time(), time.monotonic()
    await asyncio.sleep(window / 2)
    connections = open_connections(port)
    await asyncio.sleep(window / 2)
    cpu_share = (time.process_time() - cpu_before) / (time.monotonic() - wall_before)
    requests = await control.metrics()
    per_gang = GANG_SIZE if mode == ANCHOR else 1

    async def react(writer: KubeClient, gang_position: int) -> float:
        await asyncio.sleep(gang_position * FLIP_SPACING_SECONDS)
        positions = range(gang_position * per_gang, (gang_position + 1) * per_gang)
        flipped = time.monotonic()
        await grant(writer, mode, gangs[gang_position])
        await asyncio.gather(*(tasks[position] for position in positions))
        return max(fired[position] for position in positions) - flipped

    async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as writer:
        reactions = await asyncio.wait_for(
            asyncio.gather(*(react(writer, position) for position in range(min(flips, len(gangs))))), 300)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    sampler.cancel()
    return {"startup": startup, "window_seconds": window, "requests": requests["total"],
            "breakdown": requests["requests"], "cpu_share": cpu_share, "connections": connections,
            "rss_growth_bytes": peak - baseline, "reaction_p50": statistics.median(reactions),
            "reaction_p99": percentile(reactions, 0.99), "flips": len(reactions)}


# -- report ---------------------------------------------------------------------------------------------

def row(result: dict[str, Any]) -> str:
    gangs, minutes = result["gangs"], result["window_seconds"] / 60
    return (f"{result['mode']:>20} {gangs:>6} {result['requests'] / gangs / minutes:>10.2f}"
            f" {result['connections']:>6} {100 * result['cpu_share']:>7.1f}%"
            f" {result['rss_growth_bytes'] / 2**20:>8.1f} {result['rss_growth_bytes'] / gangs / 1024:>8.1f}"
            f" {1000 * result['reaction_p50']:>9.1f} {1000 * result['reaction_p99']:>9.1f}"
            f" {result['startup']['seconds']:>7.1f} {result['startup']['requests'] / gangs:>8.2f}")


GOAL_GANGS = 1000


def goals(result: dict[str, Any]) -> dict[str, bool]:
    """The targets for 1,000 waiting gangs in one process."""
    return {"<= 10 connections": result["connections"] <= 10,
            "<= 1 request/gang/min": result["requests"] / result["gangs"] / (result["window_seconds"] / 60) <= 1,
            "reaction p99 < 1 s": result["reaction_p99"] < 1.0, "CPU < 10 % of a core": result["cpu_share"] < 0.10,
            "RSS growth <= 100 MB": result["rss_growth_bytes"] <= 100 * 2**20}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs", default="10,100,1000", help="comma-separated N of waiting gangs")
    parser.add_argument("--anchor-gangs", default="10,100", help="N for the anchor (8 KPO triggers per gang)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--window", type=float, default=30.0, help="real seconds measured while every gang waits")
    parser.add_argument("--flips", type=int, default=100, help="gangs granted 50 ms apart for the reaction")
    parser.add_argument("--anchor-flips", type=int, default=20, help="the same for the anchor")
    parser.add_argument("--smoke", action="store_true", help="3 gangs per mode, 2 s, no anchor")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "KUBECONFIG", "GANGS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        mode, kubeconfig_path, gangs_path = options.child
        gangs = json.loads(Path(gangs_path).read_text())
        kubeconfig = yaml.safe_load(Path(kubeconfig_path).read_text())
        measured = asyncio.run(child(mode, Path(kubeconfig_path), kubeconfig, gangs, options.window, options.flips))
        print(json.dumps(measured))
        return 0
    if options.smoke:
        options.gangs, options.anchor_gangs, options.window, options.flips = "3", "", 2.0, 3
    runs = [(mode, int(n)) for mode in options.modes.split(",") if mode for n in options.gangs.split(",") if n]
    runs += [(ANCHOR, int(n)) for n in options.anchor_gangs.split(",") if n]
    print(f"{'mode':>20} {'gangs':>6} {'req/gang/min':>10} {'conns':>6} {'CPU':>8} {'RSS MB':>8} {'KB/gang':>8}"
          f" {'p50 ms':>9} {'p99 ms':>9} {'start s':>7} {'start req/gang':>8}", flush=True)
    results = []
    for mode, count in runs:
        result = measure(mode, count, options)
        if result is not None:
            results.append(result)
            print(row(result), flush=True)
    for result in results:
        if result["mode"] != ANCHOR and result["gangs"] == GOAL_GANGS:
            print(f"goals at {GOAL_GANGS} gangs, {result['mode']}: " + ", ".join(
                f"{name} {'met' if met else 'NOT met'}" for name, met in goals(result).items()))
    anchors = {result["gangs"]: result for result in results if result["mode"] == ANCHOR}
    for result in results:
        anchor = anchors.get(result["gangs"])
        if result["mode"] == ANCHOR or anchor is None:
            continue
        print(f"ratio anchor / {result['mode']} at {result['gangs']} gangs: requests"
              f" {anchor['requests'] / max(1, result['requests']):.0f}x, CPU"
              f" {anchor['cpu_share'] / max(1e-6, result['cpu_share']):.1f}x, connections"
              f" {anchor['connections'] / max(1, result['connections']):.0f}x, reaction p99"
              f" {anchor['reaction_p99'] / max(1e-6, result['reaction_p99']):.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
