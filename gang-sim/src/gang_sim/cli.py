"""``gang-sim``: command-line entry point of the Kubernetes API emulator.

``gang-sim serve [--host 127.0.0.1] [--port 0] --kubeconfig-out PATH [--faults SPEC] [--seed N]
[--scenario NAME|FILE] [--time-scale N] [--local-images GLOB,...] [--serve-kueue-v1beta1]`` starts the emulator (with
``--scenario``, also the simulated control plane of :mod:`.controllers`, its delays ``--time-scale``
times faster; ``--local-images`` adds image globs to the scenario's ``localProcessImages`` for this run,
see :mod:`.world.images`); ``gang-sim scenarios`` lists the named scenarios.
``gang-sim real --scenario NAME|FILE --kubeconfig-out PATH [--no-kueue]`` starts the real control
plane of ``make real-cluster`` (:mod:`.testing.real`) for the same scenario instead of the emulator;
``--scenario multikueue`` starts three, a Kueue MultiKueue manager and two workers
(:mod:`.testing.real.multikueue`), writes one kubeconfig with a context each and prints the
manager's URL once MultiKueue reports both workers active.
``serve`` and ``real`` write
a kubeconfig (admin token, self-signed CA), prints ``ready: <url>`` once serving, and exits 0 on
SIGTERM/SIGINT after closing open watches.

Extending: every subcommand is declared in :func:`build_parser` (one ``add_parser`` call each, with
``handler=``); options of ``serve`` live in :func:`add_serve_arguments` and the emulator is built in
:func:`make_emulator`, the one place to attach extra machinery (e.g. simulated controllers).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
import threading
from collections.abc import Sequence

from gang_sim.apiserver.http.faults import Faults
from gang_sim.apiserver.server import Emulator
from gang_sim.controllers.attach import attach
from gang_sim.testing.real import BinariesMissing, RealCluster, find
from gang_sim.testing.real.multikueue import SETUP as MULTIKUEUE
from gang_sim.testing.real.multikueue import RealMultiKueue
from gang_sim.world import images
from gang_sim.world.clock import ScaledClock
from gang_sim.world.scenario import Scenario, ScenarioError, load_scenario, named_scenarios


def _faults(spec: str) -> Faults:
    try:
        return Faults.parse(spec)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``gang-sim serve``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--kubeconfig-out", required=True, help="where to write the kubeconfig for clients")
    parser.add_argument(
        "--faults",
        type=_faults,
        default=Faults(),
        help="fault spec (grammar: gang_sim.apiserver.http.faults), e.g. "
        "'create/pods:1.0:503:count:3,list:0.1:reset,watch-expire:1.0:count:1,seed:7'",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for generated names and uids")
    parser.add_argument(
        "--scenario",
        type=_scenario,
        default=None,
        help="run the simulated control plane on this named scenario or scenario file (see `gang-sim scenarios`)",
    )
    parser.add_argument(
        "--time-scale",
        type=_time_scale,
        default=1.0,
        help="simulated seconds per real second (default 1); scenario delays and sim.gang.dev/ annotations are "
        "simulated seconds, the operator's timeouts are real seconds",
    )
    parser.add_argument(
        "--local-images",
        type=_local_images,
        default=(),
        metavar="GLOB,...",
        help="comma-separated image globs (fnmatch: *, ?, [seq]) whose containers run their command as local "
        "processes, added to the scenario's localProcessImages for this run, e.g. 'python:*,ghcr.io/me/*' "
        "(needs --scenario)",
    )
    parser.add_argument(
        "--serve-kueue-v1beta1",
        action="store_true",
        help="also serve the deprecated kueue.x-k8s.io/v1beta1, as Kueue <= 0.19 (Kueue 0.20 serves v1beta2 only)",
    )


def _scenario(name_or_path: str) -> Scenario:
    try:
        return load_scenario(name_or_path)
    except ScenarioError as error:
        raise argparse.ArgumentTypeError(f"invalid scenario {name_or_path!r}: {error}") from None


def _real_scenario(name_or_path: str) -> Scenario | str:
    """A scenario for ``gang-sim real``, or ``multikueue`` (``testing.real.multikueue.SETUP``): a
    Kueue MultiKueue manager and two workers."""
    return MULTIKUEUE if name_or_path == MULTIKUEUE else _scenario(name_or_path)


def _local_images(value: str) -> tuple[str, ...]:
    try:
        return images.parse_patterns(value)
    except images.ImagePatternError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _time_scale(value: str) -> float:
    try:
        scale = float(value)
    except ValueError:
        scale = 0.0
    if scale <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return scale


def scenario_of(args: argparse.Namespace) -> Scenario | None:
    """The scenario ``serve`` runs: ``--scenario`` with ``--local-images`` appended to its
    ``localProcessImages`` (None without ``--scenario``)."""
    scenario: Scenario | None = getattr(args, "scenario", None)
    extra = tuple(getattr(args, "local_images", ()))
    if scenario is None or not extra:
        return scenario
    known = scenario.local_process_images
    patterns = known + tuple(item for item in extra if item not in known)
    return dataclasses.replace(scenario, local_process_images=patterns)


def make_emulator(args: argparse.Namespace) -> Emulator:
    """The emulator ``serve`` runs, configured from the parsed options."""
    emulator = Emulator(
        host=args.host,
        port=args.port,
        faults=args.faults,
        seed=args.seed,
        serve_kueue_v1beta1=args.serve_kueue_v1beta1,
    )
    scenario = scenario_of(args)
    if scenario is not None:
        attach(emulator, scenario, ScaledClock(args.time_scale))
    return emulator


def _run_scenarios(args: argparse.Namespace) -> int:
    for name in named_scenarios():
        print(f"{name}\t{load_scenario(name).description}")
    return 0


async def serve(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; print ``ready: <url>`` once the kubeconfig is written."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop.set)
    emulator = make_emulator(args)
    url = await emulator.start()
    try:
        emulator.write_kubeconfig(args.kubeconfig_out)
        print(f"ready: {url}", flush=True)
        await stop.wait()
    finally:
        await emulator.stop()
    return 0


def _run_serve(args: argparse.Namespace) -> int:
    return asyncio.run(serve(args))


def _run_real(args: argparse.Namespace) -> int:
    """Start the real control plane, print ``ready: <url>``, stop everything on SIGTERM/SIGINT; with
    ``--check``, only say whether it is built (exit 0) or what is missing (exit 2)."""
    if args.check:
        try:
            binaries = find()
        except BinariesMissing as error:
            print(f"gang-sim real: {error}", file=sys.stderr)
            return 2
        print(f"the real control plane is built: {binaries.bin}")
        return 0
    if args.kubeconfig_out is None:
        print("gang-sim real: --kubeconfig-out is required (where to write the admin kubeconfig)", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda number, frame: stop.set())
    if args.scenario == MULTIKUEUE and not args.kueue:
        print("gang-sim real: --scenario multikueue needs Kueue (drop --no-kueue)", file=sys.stderr)
        return 2
    try:
        cluster: RealCluster | RealMultiKueue = (
            RealMultiKueue(kubeconfig_path=args.kubeconfig_out)
            if args.scenario == MULTIKUEUE
            else RealCluster(args.scenario or "small", kueue=args.kueue, kubeconfig_path=args.kubeconfig_out)
        )
    except BinariesMissing as error:
        print(f"gang-sim real: {error}", file=sys.stderr)
        return 2
    with cluster:
        print(f"ready: {cluster.url}", flush=True)
        stop.wait()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``gang-sim`` parser with one subparser per command."""
    parser = argparse.ArgumentParser(prog="gang-sim", description="In-memory Kubernetes API emulator")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="serve the Kubernetes API on 127.0.0.1")
    add_serve_arguments(serve_parser)
    serve_parser.set_defaults(handler=_run_serve)
    real_parser = commands.add_parser(
        "real",
        help="start the real control plane built by `make real-cluster` (etcd, kube-apiserver, kwok, Kueue, ...)",
    )
    real_parser.add_argument("--kubeconfig-out", help="where to write the admin kubeconfig (required to start)")
    real_parser.add_argument("--check", action="store_true", help="only check that `make real-cluster` built it")
    real_parser.add_argument(
        "--scenario",
        type=_real_scenario,
        default=None,
        help="named scenario or file (default small), or `multikueue`: a Kueue MultiKueue manager and two workers "
        "(kubeconfig contexts manager, worker-1, worker-2)",
    )
    real_parser.add_argument("--no-kueue", dest="kueue", action="store_false", help="do not start Kueue")
    real_parser.set_defaults(handler=_run_real)
    scenarios_parser = commands.add_parser("scenarios", help="list the named cluster scenarios")
    scenarios_parser.set_defaults(handler=_run_scenarios)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "local_images", ()) and getattr(args, "scenario", None) is None:
        parser.error("--local-images needs --scenario: only the simulated kubelet runs containers")
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
