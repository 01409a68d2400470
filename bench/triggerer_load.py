"""Triggerer load: N gangs of 8 waiting in one process, per reservation mode, against the anchor.

For every mode (``provisioning_request``, ``kueue``, ``gates``) and every N of ``--gangs``:

1. a fresh emulator (``gang-sim serve``, a process of its own, no controllers) gets N gangs whose
   reservations stay unanswered: owner ConfigMap + PodTemplate + ProvisioningRequest without
   conditions (``provisioning_request``), the same plus 8 gated member pods (``gates``), owner
   ConfigMap + a Kueue Workload that is not admitted (``kueue``);
2. a child process, measured alone, starts N ``ReservationTrigger``s (production defaults: 5-minute
   watches, one-hour deadline) and waits until every one watches (at most ``--startup-limit`` seconds,
   default 600; past it the row says how many watched); then, for ``--window`` seconds of
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

The previous implementation, measured in the same run for every N of ``--previous-gangs`` and every
mode: the same gangs and measurement with the provider package of the git ref ``--previous`` (default
``main``; ``git archive`` into a temporary folder put first on the measuring process's path), printed
as ``<mode>@<ref>``; the summary gives each mode's memory per gang against it.

Goals, printed per row of the provider: peak RSS growth <= 30 KB per waiting gang at every N, reaction
p99 < 1 s, and at 10,000 gangs the process within one core (CPU share < 100 %).

``--backend real`` runs the same against the real control plane (``bench/real_backend.py``: etcd,
kube-apiserver 1.37.2, kube-controller-manager, kube-scheduler, kwok; Kueue for the ``kueue`` mode),
one fresh cluster per (mode, N) from ``bench/triggerer_real.yaml`` (no nodes: nothing is scheduled,
as on the emulator without controllers). Requests are the reads of the gang's kinds counted by the
apiserver's ``apiserver_request_total``, which counts a WATCH when it ends; ``watches`` is the number
of WATCH requests the process holds open (``apiserver_longrunning_requests``) and ``bg/min`` the
control plane's own requests per minute in the window. ``--backend both`` runs both and prints the
real figures beside the emulator's.

Run: ``.venv/bin/python -m bench.triggerer_load [--gangs 10,100,1000,10000]
[--anchor-gangs 10,100] [--previous-gangs 1000] [--previous main] [--window 30] [--flips 100]
[--backend emulator|real|both] [--startup-limit 600]``; ``--smoke``
runs 3 gangs per mode for 2 s.

The gangs' objects and triggers are in ``bench/waiting_gangs.py``, the measuring process in
``bench/triggerer_process.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="gang-bench-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

import contextlib
from collections.abc import Iterator

import yaml

from bench.emulator import start_server
from bench.real_backend import real_cluster
from bench.triggerer_process import child
from bench.waiting_gangs import ANCHOR, MODES, create_gangs
from gang_sim.world.scenario import load_scenario

CHILD_TIMEOUT_SECONDS = 1200
"""How long the measuring process may run beyond ``--startup-limit`` (window, reactions, teardown)."""
BACKENDS = ("emulator", "real")
REAL_SCENARIO = Path(__file__).with_name("triggerer_real.yaml")


@contextlib.contextmanager
def api_server(backend: str, mode: str, folder: Path) -> Iterator[Path]:
    """A fresh API server of ``backend`` for one measurement; yields its admin kubeconfig's path."""
    if backend == "real":
        with real_cluster(load_scenario(str(REAL_SCENARIO)), kueue=mode == "kueue") as cluster:
            yield cluster.kubeconfig_path
        return
    kubeconfig_path = folder / "kubeconfig"
    server = start_server(kubeconfig_path)
    try:
        yield kubeconfig_path
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # 10,000 gangs' objects take the emulator a while to drop
            server.kill()
            server.wait(timeout=30)


@contextlib.contextmanager
def previous_provider(ref: str) -> Iterator[Path]:
    """A folder holding the ``airflow_provider_gang`` package of git ``ref`` of this repository."""
    with tempfile.TemporaryDirectory(prefix="gang-previous-") as folder:
        repository = Path(__file__).parents[1]
        archive = subprocess.run(
            ["git", "-C", str(repository), "archive", ref, "airflow_provider_gang"],
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True, timeout=120)
        yield Path(folder)


def measure(
    backend: str, mode: str, count: int, options: argparse.Namespace, provider: Path | None = None
) -> dict[str, Any] | None:
    """One (backend, mode, N): a fresh API server, the gangs, then the child process that measures;
    ``None`` when that process could not finish (its own calls timed out: the process is saturated)."""
    with tempfile.TemporaryDirectory(prefix="gang-load-") as folder:
        gangs_path = Path(folder) / "gangs.json"
        with api_server(backend, mode, Path(folder)) as kubeconfig_path:
            kubeconfig = yaml.safe_load(kubeconfig_path.read_text())
            started = time.monotonic()
            gangs = asyncio.run(create_gangs(kubeconfig, mode, count))
            setup_seconds = time.monotonic() - started
            gangs_path.write_text(json.dumps(gangs))
            flips = options.anchor_flips if mode == ANCHOR else options.flips
            command = [
                sys.executable,
                __file__,
                "--child",
                mode,
                str(kubeconfig_path),
                str(gangs_path),
                "--window",
                str(options.window),
                "--flips",
                str(flips),
                "--backend",
                backend,
                "--startup-limit",
                str(options.startup_limit),
            ]
            # The repository for ``bench``, ahead of whatever the caller's path already held.
            # The previous provider (if measured) first, then the repository for ``bench``.
            first = [str(provider)] if provider is not None else []
            search_path = os.pathsep.join(
                filter(None, [*first, str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")])
            )
            child = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=options.startup_limit + CHILD_TIMEOUT_SECONDS,
                check=False,
                env={**os.environ, "PYTHONPATH": search_path},
            )
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["?"])[-1]
        print(f"{backend:>8} {mode:>20} {count:>6}  the measuring process failed ({last}): saturated", flush=True)
        return None
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    label = mode if provider is None else f"{mode}@{options.previous}"
    return {**result, "backend": backend, "mode": label, "gangs": count, "setup_seconds": setup_seconds}


def per_gang_minute(result: dict[str, Any]) -> float:
    return float(result["requests"]) / result["gangs"] / (result["window_seconds"] / 60)


def startup_per_gang(result: dict[str, Any]) -> float:
    return float(result["startup"]["requests"]) / result["gangs"]


def row(result: dict[str, Any]) -> str:
    gangs, minutes = result["gangs"], result["window_seconds"] / 60
    watches = "-" if result.get("open_watches") is None else str(result["open_watches"])
    background = "-" if result.get("background") is None else f"{result['background'] / minutes:.0f}"
    return (
        f"{result['backend']:>8} {result['mode']:>20} {gangs:>6} {per_gang_minute(result):>10.2f}"
        f" {result['connections']:>6} {watches:>7} {100 * result['cpu_share']:>7.1f}%"
        f" {result['rss_growth_bytes'] / 2**20:>8.1f} {result['rss_growth_bytes'] / gangs / 1024:>8.1f}"
        f" {1000 * result['reaction_p50']:>9.1f} {1000 * result['reaction_p99']:>9.1f}"
        f" {result['startup']['seconds']:>7.1f} {startup_per_gang(result):>8.2f} {background:>6}"
    )


GOAL_GANGS = 1000
SCALE_GANGS = 10_000
GOAL_KB_PER_GANG = 30


def is_provider(result: dict[str, Any]) -> bool:
    return result["mode"] != ANCHOR and "@" not in result["mode"]


def goals(result: dict[str, Any]) -> dict[str, bool]:
    """The targets for 1,000 waiting gangs in one process, and memory, reaction and CPU at any N."""
    met = {
        f"<= {GOAL_KB_PER_GANG} KB/gang": result["rss_growth_bytes"] / result["gangs"] <= GOAL_KB_PER_GANG * 1024,
        "reaction p99 < 1 s": result["reaction_p99"] < 1.0,
    }
    if result["gangs"] == GOAL_GANGS:
        met["<= 10 connections"] = result["connections"] <= 10
        met["<= 1 request/gang/min"] = per_gang_minute(result) <= 1
        met["CPU < 10 % of a core"] = result["cpu_share"] < 0.10
    if result["gangs"] >= SCALE_GANGS:
        met["within one core"] = result["cpu_share"] < 1.0
    return met


def summary(results: list[dict[str, Any]]) -> list[str]:
    """The goals at 1,000 gangs, the ratios against the anchor of the same backend and N, and, when both
    backends ran, each real figure beside the emulator's."""
    lines = []
    for result in results:
        if is_provider(result):
            lines.append(
                f"goals at {result['gangs']} gangs, {result['backend']} {result['mode']}: "
                + ", ".join(f"{name} {'met' if met else 'NOT met'}" for name, met in goals(result).items())
            )
    by_mode = {(result["backend"], result["mode"], result["gangs"]): result for result in results}
    for result in results:
        if "@" not in result["mode"]:
            continue
        current = by_mode.get((result["backend"], result["mode"].split("@")[0], result["gangs"]))
        if current is not None:
            lines.append(
                f"previous / now, {current['mode']} at {result['gangs']} gangs ({result['backend']}): RSS per gang"
                f" {result['rss_growth_bytes'] / result['gangs'] / 1024:.1f} KB vs"
                f" {current['rss_growth_bytes'] / current['gangs'] / 1024:.1f} KB"
                f" ({result['rss_growth_bytes'] / max(1, current['rss_growth_bytes']):.1f}x), CPU"
                f" {100 * result['cpu_share']:.1f} % vs {100 * current['cpu_share']:.1f} %, reaction p99"
                f" {1000 * result['reaction_p99']:.0f} vs {1000 * current['reaction_p99']:.0f} ms"
            )
    anchors = {(result["backend"], result["gangs"]): result for result in results if result["mode"] == ANCHOR}
    for result in results:
        anchor = anchors.get((result["backend"], result["gangs"]))
        if not is_provider(result) or anchor is None:
            continue
        lines.append(
            f"ratio anchor / {result['mode']} at {result['gangs']} gangs ({result['backend']}): requests"
            f" {anchor['requests'] / max(1, result['requests']):.0f}x, CPU"
            f" {anchor['cpu_share'] / max(1e-6, result['cpu_share']):.1f}x, connections"
            f" {anchor['connections'] / max(1, result['connections']):.0f}x, reaction p99"
            f" {anchor['reaction_p99'] / max(1e-6, result['reaction_p99']):.0f}x"
        )
    emulated = {(result["mode"], result["gangs"]): result for result in results if result["backend"] == "emulator"}
    for result in results:
        other = emulated.get((result["mode"], result["gangs"]))
        if result["backend"] != "real" or other is None:
            continue
        lines.append(
            f"real beside emulator, {result['mode']} at {result['gangs']} gangs: requests/gang/min"
            f" {per_gang_minute(result):.2f} vs {per_gang_minute(other):.2f}, connections"
            f" {result['connections']} vs {other['connections']}, reaction p99"
            f" {1000 * result['reaction_p99']:.0f} vs {1000 * other['reaction_p99']:.0f} ms, startup requests/gang"
            f" {startup_per_gang(result):.2f} vs {startup_per_gang(other):.2f}"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs", default="10,100,1000", help="comma-separated N of waiting gangs")
    parser.add_argument("--anchor-gangs", default="10,100", help="N for the anchor (8 KPO triggers per gang)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--window", type=float, default=30.0, help="real seconds measured while every gang waits")
    parser.add_argument("--flips", type=int, default=100, help="gangs granted 50 ms apart for the reaction")
    parser.add_argument("--anchor-flips", type=int, default=20, help="the same for the anchor")
    parser.add_argument("--previous", default="main", help="git ref of the previous implementation")
    parser.add_argument("--previous-gangs", default="", help="N for the previous implementation, every mode")
    parser.add_argument("--backend", choices=(*BACKENDS, "both"), default="emulator", help="where the gangs wait")
    parser.add_argument(
        "--startup-limit", type=float, default=600.0, help="seconds every trigger may take to start watching"
    )
    parser.add_argument("--smoke", action="store_true", help="3 gangs per mode, 2 s, no anchor")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "KUBECONFIG", "GANGS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        mode, kubeconfig_path, gangs_path = options.child
        gangs = json.loads(Path(gangs_path).read_text())
        kubeconfig = yaml.safe_load(Path(kubeconfig_path).read_text())
        measured = asyncio.run(
            child(
                mode,
                Path(kubeconfig_path),
                kubeconfig,
                gangs,
                options.window,
                options.flips,
                options.backend,
                options.startup_limit,
            )
        )
        print(json.dumps(measured))
        return 0
    if options.smoke:
        options.gangs, options.anchor_gangs, options.window, options.flips = "3", "", 2.0, 3
    backends = BACKENDS if options.backend == "both" else (options.backend,)
    runs = [(mode, int(n)) for mode in options.modes.split(",") if mode for n in options.gangs.split(",") if n]
    runs += [(ANCHOR, int(n)) for n in options.anchor_gangs.split(",") if n]
    previous_runs = [
        (mode, int(n)) for mode in options.modes.split(",") if mode for n in options.previous_gangs.split(",") if n
    ]
    print(
        f"{'backend':>8} {'mode':>20} {'gangs':>6} {'req/gang/min':>10} {'conns':>6} {'watches':>7} {'CPU':>8}"
        f" {'RSS MB':>8} {'KB/gang':>8} {'p50 ms':>9} {'p99 ms':>9} {'start s':>7} {'start req/gang':>8}"
        f" {'bg/min':>6}",
        flush=True,
    )
    results = []
    with contextlib.ExitStack() as stack:
        previous = stack.enter_context(previous_provider(options.previous)) if previous_runs else None
        for backend in backends:
            for mode, count, provider in [
                *((m, n, None) for m, n in runs),
                *((m, n, previous) for m, n in previous_runs),
            ]:
                result = measure(backend, mode, count, options, provider)
                if result is not None:
                    results.append(result)
                    print(row(result), flush=True)
    for line in summary(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
