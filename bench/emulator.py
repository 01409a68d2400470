"""Benchmark of the Kubernetes API emulator (``gang-sim``) on this machine.

Runs ``gang-sim serve`` as a separate process (so client and server do not share a GIL) and drives it
over HTTPS with aiohttp, like the provider's clients would:

- creates/s: ConfigMap creates with 32 requests in flight;
- list latency: listing those ConfigMaps (one namespace) repeatedly;
- watch fan-out: 200 concurrent watches on one namespace, then creates one at a time; latency is
  from just before the POST is sent until each watcher has parsed the event (both sides read the
  system-wide monotonic clock);
- LIST by name: ``fieldSelector=metadata.name=<name>`` for ProvisioningRequests, as a waiting gang
  asks for its own, with 30 requests in the namespace (the anchor) and again after it holds 3,000;
  the ratios (latency, and the emulator process's CPU per LIST read from ``/proc``) say whether a
  LIST's cost grows with the number of objects (the store's indexes).

Anchor, measured in the same run: ``GET /version`` (TLS + HTTP + auth round trip with no store work).
Targets: >= 1,000 creates/s and watch fan-out p99 < 50 ms (a kube-apiserver's SLOs: mutating calls
p99 <= 1 s, https://github.com/kubernetes/community/blob/master/sig-scalability/slos/api_call_latency.md;
the emulator must stay far below them so that tests measure the provider, not the emulator).
Usage: ``.venv/bin/python -m bench.emulator [--creates 2000] [--watchers 200] [--events 40] [--by-name 3000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def start_server(kubeconfig: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-c",
        "from gang_sim.cli import main; raise SystemExit(main())",
        "serve",
        "--kubeconfig-out",
        str(kubeconfig),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready: "):
        process.kill()
        raise SystemExit(f"gang-sim did not start: {line!r}")
    return process


def session_for(kubeconfig: Path) -> tuple[str, dict[str, str], ssl.SSLContext]:
    document = yaml.safe_load(kubeconfig.read_text())
    cluster = document["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    headers = {"Authorization": f"Bearer {document['users'][0]['user']['token']}", "Content-Type": "application/json"}
    return cluster["server"], headers, context


async def timed_many(count: int, in_flight: int, request) -> float:
    """Seconds to run ``request(i)`` for i < count with ``in_flight`` concurrent workers."""
    numbers = iter(range(count))

    async def worker() -> None:
        for number in numbers:
            await request(number)

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))), timeout=120)
    return time.perf_counter() - started


async def run(
    args: argparse.Namespace, server_pid: int, server: str, headers: dict[str, str], tls: ssl.SSLContext
) -> dict[str, float]:
    results: dict[str, float] = {}
    connector = aiohttp.TCPConnector(ssl=tls, limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(server, headers=headers, connector=connector, timeout=timeout) as session:
        for namespace in ("bench", "fanout"):
            async with session.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}) as response:
                assert response.status == 201, await response.text()

        async def version(_: int) -> None:
            async with session.get("/version") as response:
                await response.read()

        await timed_many(200, 32, version)  # warm the connection pool
        results["anchor version requests/s"] = args.creates / await timed_many(args.creates, 32, version)

        async def create(number: int) -> None:
            body = {"metadata": {"name": f"cm-{number}", "labels": {"bench": "yes"}}, "data": {"key": "value" * 10}}
            async with session.post("/api/v1/namespaces/bench/configmaps", json=body) as response:
                assert response.status == 201, await response.text()
                await response.read()

        results["creates/s"] = args.creates / await timed_many(args.creates, 32, create)

        list_latencies = []
        version_latencies = []
        for _ in range(args.lists):
            started = time.perf_counter()
            async with session.get("/api/v1/namespaces/bench/configmaps") as response:
                items = (await response.json())["items"]
            list_latencies.append(time.perf_counter() - started)
            assert len(items) == args.creates
            started = time.perf_counter()
            async with session.get("/version") as response:
                await response.read()
            version_latencies.append(time.perf_counter() - started)
        results[f"list of {args.creates} p50 ms"] = 1000 * statistics.median(list_latencies)
        results[f"list of {args.creates} p99 ms"] = 1000 * percentile(list_latencies, 0.99)
        results["anchor version p50 ms"] = 1000 * statistics.median(version_latencies)

        received: list[dict[str, float]] = [{} for _ in range(args.watchers)]
        ready = asyncio.Event()
        opened = 0
        async with session.get("/api/v1/namespaces/fanout/configmaps", params={"limit": "1"}) as response:
            start_version = (await response.json())["metadata"]["resourceVersion"]

        async def watcher(index: int) -> None:
            nonlocal opened
            params = {"watch": "true", "resourceVersion": start_version, "timeoutSeconds": "60"}
            async with session.get("/api/v1/namespaces/fanout/configmaps", params=params) as response:
                opened += 1
                if opened == args.watchers:
                    ready.set()
                async for line in response.content:
                    event = json.loads(line)
                    received[index][event["object"]["metadata"]["name"]] = time.monotonic()
                    if len(received[index]) == args.events:
                        return

        watchers = [asyncio.create_task(watcher(i)) for i in range(args.watchers)]
        await asyncio.wait_for(ready.wait(), timeout=60)
        await asyncio.sleep(0.2)  # the last watch registers on the server after its response headers
        sent: dict[str, float] = {}
        for number in range(args.events):
            name = f"fan-{number}"
            sent[name] = time.monotonic()
            async with session.post(
                "/api/v1/namespaces/fanout/configmaps", json={"metadata": {"name": name}}
            ) as response:
                assert response.status == 201
            await asyncio.sleep(0.02)
        await asyncio.wait_for(asyncio.gather(*watchers), timeout=60)
        latencies = [times[name] - sent[name] for times in received for name in sent]
        results[f"watch fan-out ({args.watchers} watchers) p50 ms"] = 1000 * statistics.median(latencies)
        results[f"watch fan-out ({args.watchers} watchers) p99 ms"] = 1000 * percentile(latencies, 0.99)
        results.update(await list_by_name(session, server_pid, args.by_name_anchor, args.by_name, args.lists * 10))
    return results


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def list_by_name(
    session: aiohttp.ClientSession, server_pid: int, anchor: int, large: int, samples: int
) -> dict[str, float]:
    """LIST one ProvisioningRequest by a metadata.name field selector with ``anchor`` then ``large``
    requests in the namespace: median latency and the emulator's CPU per LIST of each, and the ratios."""
    path = "/apis/autoscaling.x-k8s.io/v1/namespaces/by-name/provisioningrequests"
    async with session.post("/api/v1/namespaces", json={"metadata": {"name": "by-name"}}) as response:
        assert response.status == 201, await response.text()

    async def create(number: int) -> None:
        body = {
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": f"gang-{number}"},
            "spec": {
                "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                "podSets": [{"podTemplateRef": {"name": f"gang-{number}"}, "count": 8}],
            },
        }
        async with session.post(path, json=body) as response:
            assert response.status == 201, await response.text()
            await response.read()

    async def median_list_ms(population: int) -> tuple[float, float]:
        latencies = []
        cpu_before = cpu_seconds(server_pid)
        for sample in range(samples):
            name = f"gang-{sample * 7919 % population}"
            started = time.perf_counter()
            async with session.get(path, params={"fieldSelector": f"metadata.name={name}"}) as response:
                items = (await response.json())["items"]
            latencies.append(time.perf_counter() - started)
            assert [item["metadata"]["name"] for item in items] == [name]
        return 1000 * statistics.median(latencies), 1000 * (cpu_seconds(server_pid) - cpu_before) / samples

    await timed_many(anchor, 16, create)
    small, small_cpu = await median_list_ms(anchor)
    await timed_many(large - anchor, 32, lambda number: create(number + anchor))
    big, big_cpu = await median_list_ms(large)
    return {
        f"list by name among {anchor} (anchor) p50 ms": small,
        f"list by name among {large} p50 ms": big,
        f"list by name {large} vs {anchor} (ratio)": big / small,
        f"list by name among {anchor} emulator CPU ms/list": small_cpu,
        f"list by name among {large} emulator CPU ms/list": big_cpu,
        f"list by name CPU {large} vs {anchor} (ratio)": big_cpu / small_cpu if small_cpu else float("inf"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--watchers", type=int, default=200)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--by-name", type=int, default=3000, help="ProvisioningRequests for the LIST-by-name case")
    parser.add_argument("--by-name-anchor", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gang-sim-bench-") as folder:
        kubeconfig = Path(folder) / "kubeconfig"
        process = start_server(kubeconfig)
        try:
            results = asyncio.run(run(args, process.pid, *session_for(kubeconfig)))
        finally:
            process.terminate()
            process.wait(timeout=30)
    for name, value in results.items():
        print(f"{name:45s} {value:10.1f}")
    creates = results["creates/s"]
    p99 = results[f"watch fan-out ({args.watchers} watchers) p99 ms"]
    print(f"{'creates/s vs anchor GET /version/s':45s} {creates / results['anchor version requests/s']:10.2f}x")
    ratio = results[f"list by name CPU {args.by_name} vs {args.by_name_anchor} (ratio)"]
    flat = "met" if ratio < 1.5 else "NOT met"
    print(f"target LIST by name: emulator CPU flat in object count (ratio < 1.5): {flat} ({ratio:.2f})")
    print(f"target creates/s >= 1000: {'met' if creates >= 1000 else 'NOT met'} ({creates:.0f})")
    print(f"target fan-out p99 < 50 ms: {'met' if p99 < 50 else 'NOT met'} ({p99:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
