"""A gang of 16 with ``required_topology`` against the same gang without it, on a half-full cluster.

The cluster (``bench.topology_cluster.half_full_document``): two blocks of four racks of six 4-GPU
hosts, other teams' pods holding 104 of the 192 GPUs unevenly, so that one rack (``rack-a4``) has room
for 16 one-GPU members and the others 6 to 12. Per mode, two gangs of 16 run one after the other on the
same cluster, each torn down (and its pods gone) before the next:

* **anchor** - the gang without a topology (``kueue``: queue ``plain``, a flavor without a Topology, so
  the kube-scheduler places the pods; ``gates``: no pin);
* **topology** - the same gang with ``required_topology`` = rack (``kueue``: queue ``tas``, Kueue's
  Topology Aware Scheduling; ``gates``: the domain the operator chooses and pins, the ranks placed by
  host at launch).

Each gang goes through the operator's own cluster actions (``hooks``): the topology's placement, the
reservation (``creation.ensure_reservation``) and, for ``gates``, the launch once its
ProvisioningRequest is provisioned. Reported per gang: the seconds from the start of the try to
every member bound (a watch on the gang's pods), and the distinct racks and blocks its members were
bound in; then the ratio of the median times, topology / anchor, over ``--repeat`` pairs (default 3;
anchor and topology alternate, so a change of load on the machine falls on both). ``--backend
emulator`` runs gang-sim at real time (its controllers' delays are real seconds), ``real`` the real
control plane of ``make real-cluster`` (Kueue 0.17, the cluster-autoscaler and the kube-scheduler
1.37 on kwok nodes), ``both`` (the default) one then the other, a fresh cluster each.

Run: ``.venv/bin/python -m bench.topology [--backend emulator|real|both] [--modes kueue,gates] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_gang.hooks import creation, deletion, topology_reads
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import NODES, PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming, provisioning
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.provisioning import ProvisioningState
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.reservation.validation import BEST_EFFORT_ATOMIC
from bench.launch import all_bound
from bench.topology_cluster import BLOCK, GPU_TOLERATION, HALF_FULL_FILLERS, RACK, half_full_document, write
from gang_sim.testing import ClusterHarness
from gang_sim.testing.real import RealCluster
from gang_sim.world.scenario import load_scenario

SIZE = 16
BACKENDS = ("emulator", "real")
MODES = ("kueue", "gates")
TEMPLATE = {
    "metadata": {"annotations": {"sim.gang.dev/run-seconds": "3600"}},
    "spec": {
        "containers": [{"name": "trainer", "image": "trainer:sim", "command": ["train"]}],
        "tolerations": [dict(GPU_TOLERATION)],  # what the operator's gpus= adds (tries.member_template)
    },
}
BOUND_TIMEOUT = 300.0


@dataclass(frozen=True)
class Run:
    """One gang: seconds from the start of its try to every member bound, racks and blocks it spans."""

    mode: str
    way: str
    bound: float
    racks: int
    blocks: int
    where: str


def gang(mode: str, way: str) -> GangSpec:
    topology = way == "topology"
    kueue = mode == "kueue"
    return GangSpec(
        name=f"bench-{mode}-{way}",
        namespace="default",
        size=SIZE,
        pod_template=TEMPLATE,
        mode=ReservationMode(mode),
        resources=MemberResources(gpus=1, cpu="1"),
        provisioning_class=None if kueue else BEST_EFFORT_ATOMIC,
        queue=("tas" if topology else "plain") if kueue else None,
        required_topology=RACK if topology else None,
    )


async def provisioned(client: KubeClient, spec: GangSpec) -> None:
    """Wait (polling every half second) until the gang's ProvisioningRequest is ``Provisioned=True``."""
    name = naming.GangNames(spec.name).provisioning_request
    deadline = time.perf_counter() + BOUND_TIMEOUT
    while time.perf_counter() < deadline:
        request = await client.get(PROVISIONING_REQUESTS, name, spec.namespace)
        if provisioning.classify_provisioning_request(request) is ProvisioningState.PROVISIONED:
            return
        await asyncio.sleep(0.5)
    raise SystemExit(f"{spec.name}: the ProvisioningRequest was not provisioned in {BOUND_TIMEOUT:.0f} s")


async def start_try(client: KubeClient, spec: GangSpec) -> GangSpec:
    """What a try does before its members are bound (``operators.starting`` and ``launching``)."""
    placed, _ = await topology_reads.placed(client, spec)
    made = await creation.ensure_reservation(client, placed, owner_try=1)
    if placed.mode is ReservationMode.GATES:
        await provisioned(client, placed)
        places = await topology_reads.places_at_launch(client, placed, job_uid=made.job_uid)
        await creation.launch(client, placed, size=SIZE, owner_uid=made.owner_uid, hosts=places.hosts)
    return placed


async def spanned(client: KubeClient, spec: GangSpec) -> tuple[int, int, str]:
    """Racks and blocks of the nodes the gang's members are bound to, and the racks by members."""
    pods, _ = await client.list(PODS, spec.namespace, label_selector=common.member_selector(spec))
    nodes, _ = await client.list(NODES)
    labels = {node["metadata"]["name"]: node["metadata"].get("labels") or {} for node in nodes}
    places = [labels.get(pod["spec"].get("nodeName"), {}) for pod in pods if pod["spec"].get("nodeName")]
    racks: dict[str, int] = {}
    for place in places:
        racks[place.get(RACK, "?")] = racks.get(place.get(RACK, "?"), 0) + 1
    where = ", ".join(f"{rack} {count}" for rack, count in sorted(racks.items()))
    return len(racks), len({place.get(BLOCK) for place in places}), where


async def gone(client: KubeClient, spec: GangSpec) -> None:
    """Tear the gang down and wait until none of its pods is left (the room is the next gang's)."""
    await deletion.teardown(client, spec, keep_members=False)
    deadline = time.perf_counter() + BOUND_TIMEOUT
    while time.perf_counter() < deadline:
        pods, _ = await client.list(PODS, spec.namespace, label_selector=common.gang_selector(spec))
        if not pods:
            return
        await asyncio.sleep(0.5)
    raise SystemExit(f"{spec.name}: its pods were not gone in {BOUND_TIMEOUT:.0f} s")


async def measure(settings: ConnectionSettings, mode: str, way: str) -> Run:
    spec = gang(mode, way)
    async with await ClientOptions().connect(settings) as watcher, await ClientOptions().connect(settings) as client:
        watching = asyncio.Event()
        bound = asyncio.create_task(all_bound(watcher, spec, SIZE, watching))
        try:
            await asyncio.wait_for(watching.wait(), 60)
            started = time.perf_counter()
            placed = await start_try(client, spec)
            try:
                at = await asyncio.wait_for(asyncio.shield(bound), BOUND_TIMEOUT)
            except TimeoutError:
                raise SystemExit(f"{spec.name}: not every member bound in {BOUND_TIMEOUT:.0f} s") from None
            racks, blocks, where = await spanned(client, placed)
            await gone(client, placed)
            return Run(mode, way, at - started, racks, blocks, where)
        finally:
            bound.cancel()
            await asyncio.gather(bound, return_exceptions=True)


def fillers_bound(objects: list[dict[str, Any]]) -> bool:
    held = sum(len(gpus) for gpus in HALF_FULL_FILLERS.values())
    return sum(1 for pod in objects if (pod.get("spec") or {}).get("nodeName")) >= held


@contextlib.contextmanager
def cluster(backend: str, scenario: Path) -> Iterator[ConnectionSettings]:
    """The backend's cluster on ``scenario``, once every filler pod is bound."""
    loaded = load_scenario(str(scenario))
    if backend == "real":
        with RealCluster(loaded) as real:
            settings = ConnectionSettings(kubeconfig=yaml.safe_load(real.kubeconfig_path.read_text()))
            asyncio.run(wait_for_fillers(settings))
            yield settings
        return
    with ClusterHarness(loaded, time_scale=1.0) as harness:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))
        asyncio.run(wait_for_fillers(settings))
        yield settings


async def wait_for_fillers(settings: ConnectionSettings) -> None:
    async with await ClientOptions().connect(settings) as client:
        deadline = time.perf_counter() + BOUND_TIMEOUT
        while time.perf_counter() < deadline:
            pods, _ = await client.list(PODS, "default", label_selector="app=filler")
            if fillers_bound(pods):
                return
            await asyncio.sleep(0.5)
    raise SystemExit("the filler pods were not all bound")


def ratio(measured: float, anchor: float) -> str:
    return f"{measured / max(anchor, 1e-9):.2f}x"


def spread(values: list[int]) -> str:
    """``"4"`` when every repeat gave the same count, else ``"4-5"``."""
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


def report(backend: str, runs: list[Run]) -> list[str]:
    """Per mode and gang: the median seconds to all bound over the repeats (each repeat's in brackets),
    the racks and blocks spanned, the members by rack of the last repeat; then topology / anchor."""
    lines = [
        f"backend {backend}: gang of {SIZE} one-GPU members, {len(runs) // 2 // len({run.mode for run in runs})}"
        " repeats",
        "  mode   | gang     | all bound, median (each) s      | racks | blocks | members by rack (last)",
    ]
    medians: dict[tuple[str, str], float] = {}
    for mode in sorted({run.mode for run in runs}):
        for way in ("anchor", "topology"):
            mine = [run for run in runs if (run.mode, run.way) == (mode, way)]
            medians[mode, way] = statistics.median(run.bound for run in mine)
            each = ", ".join(f"{run.bound:.2f}" for run in mine)
            racks, blocks = spread([run.racks for run in mine]), spread([run.blocks for run in mine])
            lines.append(
                f"  {mode:<6} | {way:<8} | {medians[mode, way]:6.2f} ({each:<22}) | {racks:>5} | {blocks:>6} | "
                f"{mine[-1].where}"
            )
        anchor, measured = medians[mode, "anchor"], medians[mode, "topology"]
        spans = {
            (way, kind): spread([getattr(run, kind) for run in runs if (run.mode, run.way) == (mode, way)])
            for way in ("anchor", "topology")
            for kind in ("racks", "blocks")
        }
        lines.append(
            f"  {mode}: topology / anchor - median time to all bound {ratio(measured, anchor)}, racks "
            f"{spans['topology', 'racks']}/{spans['anchor', 'racks']}, blocks "
            f"{spans['topology', 'blocks']}/{spans['anchor', 'blocks']}"
        )
    return lines


def run_backend(backend: str, modes: list[str], repeats: int) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        scenario = write(Path(folder) / "half-full.yaml", half_full_document())
        with cluster(backend, scenario) as settings:
            runs = [
                asyncio.run(measure(settings, mode, way))
                for _ in range(repeats)
                for mode in modes
                for way in ("anchor", "topology")
            ]
    return report(backend, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: kueue, gates")
    parser.add_argument("--repeat", type=int, default=3, help="pairs (anchor, topology) per mode, alternated")
    arguments = parser.parse_args()
    modes = [mode for mode in arguments.modes.split(",") if mode]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; use {', '.join(MODES)}")
    backends = BACKENDS if arguments.backend == "both" else (arguments.backend,)
    for backend in backends:
        for line in run_backend(backend, modes, max(1, arguments.repeat)):
            print(line, flush=True)


if __name__ == "__main__":
    main()
