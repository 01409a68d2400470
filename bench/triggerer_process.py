"""The measuring side of ``bench/triggerer_load.py``: one process running the triggers of every
waiting gang, measured alone (steps 2 and 3 of that module's docstring).

Started by ``bench/triggerer_load.py --child MODE KUBECONFIG GANGS [--backend real]``, it prints one
JSON line: requests in the window (the emulator's ``/_sim/metrics``; on the real apiserver its
``apiserver_request_total``, read by ``bench/real_backend.py``, with the WATCH requests open in the
middle of the window and the control plane's own requests as ``background``), CPU share of one core,
open TCP connections to the API server, peak RSS growth, and the reaction times of the granted gangs.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.settings import ConnectionSettings
from bench.emulator import percentile, session_for
from bench.real_backend import ApiserverMetrics
from bench.waiting_gangs import ANCHOR, GANG_SIZE, build_triggers, grant

FLIP_SPACING_SECONDS = 0.05
"""Reservations are granted this far apart, each reaction measured while the others are under way."""


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


def watching(trigger: Any) -> bool:
    """Whether every reflector ``trigger`` reads from has listed and opened its watch."""
    return bool(trigger.reflectors) and all(reflector.stats.watches for reflector in trigger.reflectors)


class Control:
    """``/_sim/metrics`` over a connection closed after every request (not counted as the process's)."""

    def __init__(self, kubeconfig_path: Path) -> None:
        self.server, self.headers, self.tls = session_for(kubeconfig_path)

    async def metrics(self, method: str = "GET") -> dict[str, Any]:
        connector = aiohttp.TCPConnector(ssl=self.tls, force_close=True)
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(self.server, headers=self.headers, connector=connector) as session,
            session.request(method, "/_sim/metrics", timeout=timeout) as answer,
        ):
            document: dict[str, Any] = await answer.json()
            return document


async def child(
    mode: str,
    kubeconfig_path: Path,
    kubeconfig: dict[str, Any],
    gangs: list[dict[str, Any]],
    window: float,
    flips: int,
    backend: str = "emulator",
    startup_limit: float = 600.0,
) -> dict[str, Any]:
    """Run the triggers of ``gangs`` in this process and measure it (module docstring, steps 2 and 3);
    ``backend`` says where the requests are counted: ``emulator`` or ``real``; ``startup_limit`` is how
    many seconds every trigger may take to watch (the first LIST of the gangs' objects included)."""
    port = int(kubeconfig["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])
    real = ApiserverMetrics(kubeconfig_path) if backend == "real" else None
    control = real or Control(kubeconfig_path)
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
    watches_before = await real.open_watches() if real is not None else 0
    started = time.monotonic()
    tasks = [asyncio.create_task(wait(position, trigger)) for position, trigger in enumerate(triggers)]
    if mode == ANCHOR:
        await asyncio.sleep(10.0)
    else:
        while not all(watching(t) for t in triggers):
            if any(task.done() for task in tasks):
                raise RuntimeError("a trigger ended before every trigger watched")
            if time.monotonic() - started > startup_limit:
                watched = sum(1 for t in triggers if watching(t))
                raise RuntimeError(f"{watched} of {len(triggers)} triggers watching after {startup_limit:g} s")
            await asyncio.sleep(0.1)
    startup = {"seconds": time.monotonic() - started, "requests": (await control.metrics("DELETE"))["total"]}
    cpu_before, wall_before = time.process_time(), time.monotonic()
    await asyncio.sleep(window / 2)
    connections = open_connections(port)
    open_watches = await real.open_watches() - watches_before if real is not None else None
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
            asyncio.gather(*(react(writer, position) for position in range(min(flips, len(gangs))))), 300
        )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    sampler.cancel()
    return {
        "startup": startup,
        "window_seconds": window,
        "requests": requests["total"],
        "breakdown": requests["requests"],
        "background": requests.get("background"),
        "open_watches": open_watches,
        "cpu_share": cpu_share,
        "connections": connections,
        "rss_growth_bytes": peak - baseline,
        "reaction_p50": statistics.median(reactions),
        "reaction_p99": percentile(reactions, 0.99),
        "flips": len(reactions),
    }
