"""Launch at scale: from ``Provisioned=True`` to every member bound, for gangs of 8, 64 and 256.

For each size and mode (``provisioning_request``: members created on launch; ``gates``: members
created gated up front, their gates released on launch; ``workload``: timed instead from the
creation of its PodGroup and members, on nodes already up, to the last binding - the
kube-scheduler binds the gang itself, so there is no launch step to time apart), a fresh in-process emulator with the
simulated control plane (scheduler, cluster-autoscaler; ``ManualClock``, so simulated time moves
only when the bench advances it) gets the gang's reservation from ``creation.ensure_reservation``
and is advanced until its ProvisioningRequest is ``Provisioned=True``. Then ``creation.launch``
runs, and the bench waits for the store to commit the last member's binding (``Store.subscribe``
on the emulator's loop; no polling):

* **anchor** - sequential: the same code with ``max_parallel_requests=1``, one call at a time;
* **concurrent** - the operator's defaults (``ClientOptions()``: 32 in flight, 1000 qps / 1000 burst).

Reported per run: seconds until every member was created (released), seconds until every member
was bound, requests sent, and the ratio sequential / concurrent of the bound time; and, as "API
only", the seconds the same ``launch`` takes against an emulator without controllers (the
provider's own cost: client, HTTP, store), with its ratio. The goal is 256
members bound < 2 s after ``Provisioned=True``. ``--profile`` adds one more concurrent launch of
the largest gang, not counted above, and prints the emulator thread's top functions (cProfile): where
the emulator spends its time.

``--backend real`` measures the same launches on the real control plane (``bench/real_backend.py``:
etcd, kube-apiserver 1.37.2, kube-controller-manager, the real kube-scheduler, kwok; no
cluster-autoscaler and no Kueue), a fresh cluster per run from ``bench/launch_real.yaml`` (64 kwok
nodes of 4 GPUs, all up at start). No autoscaler provisions anything: the bench writes
``Provisioned=True`` on the ProvisioningRequest itself through its status subresource, then times
``launch`` and the real scheduler's bindings with a watch on the gang's pods (``kube.watch.Reflector``
on a connection of its own). "API only" has no real counterpart (the real apiserver always runs
with its scheduler here). ``--backend both`` runs both backends.

Run: ``.venv/bin/python -m bench.launch [--sizes 8,64,256] [--modes provisioning_request,gates]
[--backend emulator|real|both] [--profile]``; ``--modes gates,workload --sizes 64,256`` puts the
two all-at-once modes side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import pstats
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.watch import Reflector
from airflow_provider_gang.reservation import naming, provisioning
from airflow_provider_gang.reservation.manifests import common
from airflow_provider_gang.reservation.provisioning import ProvisioningState
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from bench.real_backend import real_cluster
from gang_sim.testing import ClusterHarness
from gang_sim.world.scenario import load_scenario, parse_scenario

GPUS_PER_NODE = 8
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "trainer:sim", "command": ["train"]}]}}
BOUND_TIMEOUT = 300.0
GOAL_SECONDS = 2.0
QUEUED_PROVISIONING = "queued-provisioning.gke.io"
"""GKE's DWS class: ``Provisioned=True`` once the nodes are up (the simulated autoscaler's model)."""
BACKENDS = ("emulator", "real")
REAL_SCENARIO = Path(__file__).with_name("launch_real.yaml")


def scenario(size: int, *, nodes_up: bool = False) -> Any:
    """One pool of 8-GPU nodes, room for ``size`` one-GPU members, provisioned in 60 simulated seconds
    (``nodes_up``: all there at the start, for ``workload`` mode, which asks for none)."""
    nodes = -(-size // GPUS_PER_NODE)
    return parse_scenario(
        {
            "name": f"launch-{size}",
            "nodePools": [
                {
                    "name": "gpu",
                    "zone": "us-central1-a",
                    "gpuType": "nvidia-l4",
                    "gpusPerNode": GPUS_PER_NODE,
                    "cpu": "64",
                    "memory": "512Gi",
                    "maxNodes": nodes,
                    "initialNodes": nodes if nodes_up else 0,
                    "provisioningDelaySeconds": 60,
                    "queuedProvisioning": True,
                }
            ],
        }
    )


@dataclass
class Run:
    size: int
    mode: str
    way: str
    launched: float
    bound: float
    requests: int
    api_only: float = 0.0


class BindingWatch:
    """The moment the store committed the last of ``size`` members' bindings (``spec.nodeName``)."""

    def __init__(self, harness: ClusterHarness, gang: str, size: int) -> None:
        self.gang, self.size = gang, size
        self.bound: set[str] = set()
        self.done = threading.Event()
        self.at = 0.0
        self.unsubscribe = harness.run(lambda: harness.store.subscribe(self.changed, shared=True))

    def changed(self, event_type: str, resource: str, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        if resource != "v1/pods" or (metadata.get("labels") or {}).get(naming.GANG_LABEL) != self.gang:
            return
        if (obj.get("spec") or {}).get("nodeName"):
            self.bound.add(str(metadata["name"]))
            if len(self.bound) == self.size and not self.done.is_set():
                self.at = time.perf_counter()
                self.done.set()


def stored_request(harness: ClusterHarness, name: str) -> dict[str, Any]:
    request: dict[str, Any] = harness.run(lambda: harness.store.get(PROVISIONING_REQUESTS.key, name, "default"))
    return request


def gang(size: int, mode: ReservationMode, way: str) -> GangSpec:
    return GangSpec(
        name=f"launch-{size}-{way}",
        namespace="default",
        size=size,
        pod_template=TEMPLATE,
        mode=mode,
        resources=MemberResources(gpus=1),
        provisioning_class=None if mode is ReservationMode.WORKLOAD else QUEUED_PROVISIONING,
    )


async def api_only(size: int, mode: ReservationMode, way: str, options: ClientOptions) -> float:
    """Seconds ``launch`` takes against the emulator without controllers: the provider, HTTP and the
    store, without the simulated control plane reacting to every member."""
    spec = gang(size, mode, way)
    with ClusterHarness() as harness:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))
        if mode is ReservationMode.WORKLOAD:  # what workload mode times: the creates of PodGroup and members
            async with await options.connect(settings) as client:
                started = time.perf_counter()
                await creation.ensure_reservation(client, spec, owner_try=1)
                return time.perf_counter() - started
        async with await ClientOptions().connect(settings) as setup:
            made = await creation.ensure_reservation(setup, spec, owner_try=1)
        async with await options.connect(settings) as client:
            started = time.perf_counter()
            await creation.launch(client, spec, size=size, owner_uid=str(made.owner_uid))
            return time.perf_counter() - started


async def measure_workload(size: int, way: str, options: ClientOptions, profile: cProfile.Profile | None) -> Run:
    """``workload`` mode on the emulator, its nodes up: from ``creation.ensure_reservation`` (the PodGroup,
    then every member linked to it) to the store committing the last member's binding."""
    spec = gang(size, ReservationMode.WORKLOAD, way)
    with ClusterHarness(scenario=scenario(size, nodes_up=True)) as harness:
        harness.advance(60)  # the nodes register
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))
        watch = BindingWatch(harness, spec.name, size)
        client: KubeClient = await options.connect(settings)
        try:
            if profile is not None:
                harness.run(profile.enable)
            started = time.perf_counter()
            await creation.ensure_reservation(client, spec, owner_try=1)
            created = time.perf_counter() - started
            if not await asyncio.to_thread(watch.done.wait, BOUND_TIMEOUT):
                raise SystemExit(f"{spec.name}: {len(watch.bound)} of {size} members bound in {BOUND_TIMEOUT:.0f} s")
            if profile is not None:
                harness.run(profile.disable)
            return Run(size, spec.mode.value, way, created, watch.at - started, client.requests_sent)
        finally:
            harness.run(watch.unsubscribe)
            await client.close()


async def measure(
    size: int, mode: ReservationMode, way: str, options: ClientOptions, profile: cProfile.Profile | None
) -> Run:
    if mode is ReservationMode.WORKLOAD:
        return await measure_workload(size, way, options, profile)
    spec = gang(size, mode, way)
    with ClusterHarness(scenario=scenario(size)) as harness:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))
        async with await ClientOptions().connect(settings) as setup:
            made = await creation.ensure_reservation(setup, spec, owner_try=1)
        request_name = naming.GangNames(spec.name).provisioning_request
        for _ in range(60):
            request = stored_request(harness, request_name)
            if provisioning.classify_provisioning_request(request) is ProvisioningState.PROVISIONED:
                break
            harness.advance(10)
        else:
            raise SystemExit(f"{spec.name}: the ProvisioningRequest was never provisioned: {request.get('status')}")
        watch = BindingWatch(harness, spec.name, size)
        client: KubeClient = await options.connect(settings)
        try:
            if profile is not None:
                harness.run(profile.enable)
            started = time.perf_counter()
            await creation.launch(client, spec, size=size, owner_uid=str(made.owner_uid))
            launched = time.perf_counter() - started
            if not await asyncio.to_thread(watch.done.wait, BOUND_TIMEOUT):
                raise SystemExit(f"{spec.name}: {len(watch.bound)} of {size} members bound in {BOUND_TIMEOUT:.0f} s")
            if profile is not None:
                harness.run(profile.disable)
            return Run(size, mode.value, way, launched, watch.at - started, client.requests_sent)
        finally:
            harness.run(watch.unsubscribe)
            await client.close()


def provisioned_status() -> dict[str, Any]:
    """``Accepted`` and ``Provisioned`` True, as the cluster-autoscaler writes them on success
    (kubernetes/autoscaler ``provisioningrequest/conditions/conditions.go``); every field the CRD requires."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "conditions": [
            {"type": kind, "status": "True", "reason": kind, "message": "set by the bench", "lastTransitionTime": now}
            for kind in ("Accepted", "Provisioned")
        ]
    }


async def all_bound(client: KubeClient, spec: GangSpec, size: int, watching: asyncio.Event) -> float:
    """``perf_counter()`` when the watch on ``spec``'s member pods has shown ``size`` of them with a
    ``spec.nodeName``; ``watching`` is set once the LIST is done and the WATCH follows from its
    resourceVersion (nothing after it is missed)."""
    reflector = Reflector(client, PODS, spec.namespace, label_selector=common.member_selector(spec))
    async with contextlib.aclosing(reflector.changes()) as changes:
        async for _ in changes:
            watching.set()
            if sum(1 for pod in reflector.objects.values() if (pod.get("spec") or {}).get("nodeName")) >= size:
                return time.perf_counter()
    raise RuntimeError("the watch ended")


async def measure_real(size: int, mode: ReservationMode, way: str, options: ClientOptions) -> Run:
    """One launch on a fresh real control plane: the reservation, ``Provisioned=True`` written by the
    bench, then ``launch`` until the real scheduler has bound every member."""
    spec = gang(size, mode, way)
    with real_cluster(load_scenario(str(REAL_SCENARIO)), kueue=False) as cluster:
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(cluster.kubeconfig_path.read_text()))
        if mode is ReservationMode.WORKLOAD:
            return await measure_workload_real(spec, way, settings, options)
        async with await ClientOptions().connect(settings) as setup, await ClientOptions().connect(settings) as watcher:
            made = await creation.ensure_reservation(setup, spec, owner_try=1)
            name = naming.GangNames(spec.name).provisioning_request
            await setup.patch(PROVISIONING_REQUESTS, name, {"status": provisioned_status()}, subresource="status")
            watching = asyncio.Event()
            bound = asyncio.create_task(all_bound(watcher, spec, size, watching))
            try:
                await asyncio.wait_for(watching.wait(), 60)
                async with await options.connect(settings) as client:
                    started = time.perf_counter()
                    await creation.launch(client, spec, size=size, owner_uid=str(made.owner_uid))
                    launched = time.perf_counter() - started
                    try:
                        at = await asyncio.wait_for(asyncio.shield(bound), BOUND_TIMEOUT)
                    except TimeoutError:
                        raise SystemExit(f"{spec.name}: not every member bound in {BOUND_TIMEOUT:.0f} s") from None
                    return Run(size, mode.value, way, launched, at - started, client.requests_sent)
            finally:
                bound.cancel()
                await asyncio.gather(bound, return_exceptions=True)


async def measure_workload_real(spec: GangSpec, way: str, settings: ConnectionSettings, options: ClientOptions) -> Run:
    """``workload`` mode on the real control plane: from ``creation.ensure_reservation`` to the real
    kube-scheduler's last binding of the gang's PodGroup."""
    async with await ClientOptions().connect(settings) as watcher:
        watching = asyncio.Event()
        bound = asyncio.create_task(all_bound(watcher, spec, spec.size, watching))
        try:
            await asyncio.wait_for(watching.wait(), 60)
            async with await options.connect(settings) as client:
                started = time.perf_counter()
                await creation.ensure_reservation(client, spec, owner_try=1)
                created = time.perf_counter() - started
                try:
                    at = await asyncio.wait_for(asyncio.shield(bound), BOUND_TIMEOUT)
                except TimeoutError:
                    raise SystemExit(f"{spec.name}: not every member bound in {BOUND_TIMEOUT:.0f} s") from None
                return Run(spec.size, spec.mode.value, way, created, at - started, client.requests_sent)
        finally:
            bound.cancel()
            await asyncio.gather(bound, return_exceptions=True)


def ratio(anchor: float, measured: float) -> str:
    return f"{anchor / max(measured, 1e-9):.1f}x"


def top_functions(profile: cProfile.Profile, count: int = 15) -> str:
    output = io.StringIO()
    pstats.Stats(profile, stream=output).sort_stats("cumulative").print_stats(count)
    return output.getvalue()


def verdict(size: int, concurrent: Run) -> str:
    if size != 256:
        return ""
    return f"; goal < {GOAL_SECONDS:.0f} s bound: {'met' if concurrent.bound < GOAL_SECONDS else 'NOT met'}"


async def emulator_table(modes: list[ReservationMode], sizes: list[int], ways: dict[str, ClientOptions]) -> None:
    print("Launch: Provisioned=True -> every member bound (emulator + simulated scheduler, in-process)")
    print(
        f"  concurrent = ClientOptions() ({ways['concurrent'].max_parallel_requests} in flight, "
        f"{ways['concurrent'].qps:.0f} qps); anchor = sequential (max_parallel_requests=1)"
    )
    print("  created/bound: with the simulated control plane; API only: launch() on the emulator without it")
    print(f"  {'mode':<21}{'members':>8}{'way':>12}{'created':>10}{'bound':>9}{'requests':>10}{'API only':>10}")
    for mode in modes:
        for size in sizes:
            runs = {}
            for way, options in ways.items():
                runs[way] = run = await measure(size, mode, way, options, None)
                run.api_only = await api_only(size, mode, way, options)
                print(
                    f"  {mode.value:<21}{size:>8}{way:>12}{run.launched:>9.2f}s{run.bound:>8.2f}s{run.requests:>10}"
                    f"{run.api_only:>9.2f}s"
                )
            sequential, concurrent = runs["sequential"], runs["concurrent"]
            ratios = (
                f"bound {ratio(sequential.bound, concurrent.bound)}, "
                f"API only {ratio(sequential.api_only, concurrent.api_only)}"
            )
            print(f"  {mode.value:<21}{size:>8}  ratio sequential / concurrent: {ratios}{verdict(size, concurrent)}")


async def real_table(modes: list[ReservationMode], sizes: list[int], ways: dict[str, ClientOptions]) -> None:
    print(
        "Launch on the real control plane: Provisioned=True -> every member bound by the real kube-scheduler "
        "on kwok nodes"
    )
    print(
        "  Provisioned=True set by the bench (status subresource; no cluster-autoscaler runs); "
        f"{REAL_SCENARIO.name}: every node up at start; a fresh cluster per run"
    )
    print(f"  {'mode':<21}{'members':>8}{'way':>12}{'created':>10}{'bound':>9}{'requests':>10}")
    for mode in modes:
        for size in sizes:
            runs = {}
            for way, options in ways.items():
                runs[way] = run = await measure_real(size, mode, way, options)
                print(f"  {mode.value:<21}{size:>8}{way:>12}{run.launched:>9.2f}s{run.bound:>8.2f}s{run.requests:>10}")
            sequential, concurrent = runs["sequential"], runs["concurrent"]
            print(
                f"  {mode.value:<21}{size:>8}  ratio sequential / concurrent: bound "
                f"{ratio(sequential.bound, concurrent.bound)}{verdict(size, concurrent)}"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,64,256", help="gang sizes, comma-separated")
    parser.add_argument("--modes", default="provisioning_request,gates", help="reservation modes, comma-separated")
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="emulator", help="where the gang launches")
    parser.add_argument("--profile", action="store_true", help="profile the emulator during the largest concurrent run")
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    modes = [ReservationMode(name) for name in arguments.modes.split(",")]
    ways = {"sequential": ClientOptions(max_parallel_requests=1), "concurrent": ClientOptions()}
    if arguments.backend in ("emulator", "both"):
        await emulator_table(modes, sizes, ways)
    if arguments.backend in ("real", "both"):
        await real_table(modes, sizes, ways)
    if arguments.profile:
        profile = cProfile.Profile()
        await measure(max(sizes), modes[0], "profiled", ways["concurrent"], profile)
        print(
            f"\nEmulator thread, one more concurrent launch of {max(sizes)} ({modes[0].value}), profiled apart from "
            "the figures above (cumulative time):"
        )
        print(top_functions(profile))


if __name__ == "__main__":
    asyncio.run(main())
