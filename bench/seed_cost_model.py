"""The seed document's cost story, measured on the simulated cluster: GPU-hours without and with gang.

The seed ("Cost implications of gang scheduling") says a 32-GPU job on a cluster that provisions
4 GPUs per minute bills 112 GPU-hours without gang scheduling and 98.5 with a ProvisioningRequest,
and ("Partial scheduling") that without one the members that started wait for the rest until the
framework's rendezvous times out (30 min), the job is killed and started over. This script replays
that on the shipped ``seed-cost`` cluster type (an empty pool of 4-GPU A100 nodes, 60 s boot, the
autoscaler adding one node per minute for ordinary pending pods), for jobs of 8 and 32 one-GPU
members training 3 h once all run (``bench/cost_cluster.py`` has the job driver):

- **ramp**: the seed's cost model as written: stock is plentiful, nodes arrive one a minute;
- **stockout**: the zone has stock (GPU quota) for half the job until ``--restock-minutes``; the
  members that started time out at the rendezvous, the job is retried from scratch after Airflow's
  default ``retry_delay`` (5 min) until one try runs;
- **spot**: the 32-member gang on spot nodes; one member's node is preempted at a seeded instant of
  training; the retry resumes from the last checkpoint or restarts from scratch.

Each run drives the job through the API; *plain pods* are the gang's members created without any
reservation, *gang* is the provider's ProvisioningRequest path (``best-effort-atomic-scale-up``:
nothing is created until the whole capacity is provisioned). GPU-hours are what the simulated cloud
billed: every node's GPUs from its creation to its deletion (the autoscaler removes it after
10 idle minutes). Nothing is hard-coded: the seed's figures are printed beside the measurement.

Usage: ``.venv/bin/python -m bench.seed_cost_model [--restock-minutes 40] [--seed 0] [--smoke]``. Simulated time
is stepped on a ManualClock (deterministic; about three minutes of CPU; ``--smoke`` runs the
small ``SMOKE`` story in seconds, the one ``tests/integration/control_plane/test_seed_cost_model.py`` checks).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cost_cluster import CostCluster, Job, JobSettings, NodeBill, TryRecord

from gang_sim.world.scenario import Scenario, TimedEvent, load_scenario

SEED_FIGURES = {"plain pods": 112.0, "gang": 98.5}
"""The seed's GPU-hours for its 32-GPU job (3.5 h and 3.08 h x 32 GPUs)."""
PREEMPTION_WINDOW = (0.25, 0.75)
"""The preemption falls at a uniformly drawn fraction of the training time within this window."""


@dataclass(frozen=True)
class Story:
    training_seconds: float = 3 * 3600
    rendezvous_timeout: float = 1800  # the seed's init_process_group(timeout=timedelta(minutes=30))
    retry_delay: float = 300  # Airflow [core] default_task_retry_delay
    restock_at: float = 40 * 60
    checkpoint_every: int = 15 * 60  # steps; one step per simulated second
    sizes: tuple[int, ...] = (8, 32)
    spot_size: int = 32
    gpus_per_node: int = 4

    def settings(self, size: int, *, gang: bool) -> JobSettings:
        return JobSettings(
            size=size,
            gpus=1,
            work_seconds=self.training_seconds,
            rendezvous_timeout=self.rendezvous_timeout,
            retry_delay=self.retry_delay,
            gang=gang,
        )


SMOKE = Story(
    training_seconds=300,
    rendezvous_timeout=120,
    retry_delay=30,
    restock_at=240,
    checkpoint_every=60,
    sizes=(8,),
    spot_size=8,
)


@dataclass(frozen=True)
class Result:
    label: str
    tries: list[TryRecord]
    bills: list[NodeBill]
    ended_at: float
    checkpointed: int = 0
    """The step the last try resumed from (``GANG_RESUME_STEP``; 0: from scratch)."""

    @property
    def gpu_hours(self) -> float:
        return self.billed(0.0, self.ended_at)

    def billed(self, since: float, until: float) -> float:
        return sum(bill.gpu_seconds(until, since) for bill in self.bills) / 3600

    def split(self) -> tuple[float, float, float]:
        """GPU-hours billed before the last try's training, during it, and after it (scale-down)."""
        last = self.tries[-1]
        assert last.training_started is not None
        finished = last.training_started + last.trained_seconds
        return (
            self.billed(0.0, last.training_started),
            self.billed(last.training_started, finished),
            self.billed(finished, self.ended_at),
        )

    def describe_tries(self) -> str:
        return ", ".join(f"{record.outcome} at {record.ended_at / 60:.0f} min" for record in self.tries)


@functools.cache
def seed_cost_cluster() -> Scenario:
    return load_scenario("seed-cost")


def cluster(size: int, story: Story, *, stock_gpus: int | None, spot: bool = False) -> Scenario:
    """The shipped ``seed-cost`` cluster sized for ``size`` one-GPU members; ``stock_gpus``: the zone's
    GPU quota until ``story.restock_at``, when it rises to the whole pool (``None``: no limit)."""
    base = seed_cost_cluster()
    nodes = -(-size // story.gpus_per_node)
    pool = dataclasses.replace(base.node_pools[0], max_nodes=nodes, spot=spot)
    events: tuple[TimedEvent, ...] = ()
    quota: dict[str, int] = {}
    if stock_gpus is not None:
        quota = {pool.zone: stock_gpus}
        events = (
            TimedEvent(at=story.restock_at, type="quotaChange", zone=pool.zone, gpu_quota=nodes * pool.gpus_per_node),
        )
    return dataclasses.replace(base, node_pools=(pool,), zone_gpu_quota=quota, events=events)


def measure(
    label: str, scenario: Scenario, settings: JobSettings, preempt_at: Callable[[float], float | None] = lambda _: None
) -> Result:
    """Run the job to its end on a fresh cluster, then until every node is scaled down; the bill.
    ``preempt_at(training_started)``: when the first try that trains loses rank 0's spot node."""
    with CostCluster(scenario) as sim:
        job = Job(sim, settings, name="train")
        job.run(preempt_at=preempt_at)
        sim.wait_until_no_nodes(limit=4 * 3600)
        return Result(label, job.tries, sim.bill(), sim.now(), job.tries[-1].resumed_from)


def no_gang_story(story: Story, size: int, *, stockout: bool) -> tuple[Result, Result]:
    stock = size // 2 if stockout else None
    plain = measure("plain pods", cluster(size, story, stock_gpus=stock), story.settings(size, gang=False))
    gang = measure("gang", cluster(size, story, stock_gpus=stock), story.settings(size, gang=True))
    return plain, gang


def spot_story(story: Story, seed: int) -> tuple[float, list[Result]]:
    """Anchor (not preempted), resumed from checkpoint, restarted from scratch; the preemption
    instant is drawn once from ``seed`` as a fraction of the training time."""
    fraction = random.Random(seed).uniform(*PREEMPTION_WINDOW)
    size = story.spot_size
    scenario = cluster(size, story, stock_gpus=None, spot=True)
    base = dataclasses.replace(story.settings(size, gang=True), spot=True)
    resuming = dataclasses.replace(base, checkpoint_every=story.checkpoint_every)

    def preempt_at(started: float) -> float:
        return started + fraction * story.training_seconds

    return fraction, [
        measure("spot, not preempted (anchor)", scenario, base),
        measure("preempted, resumed from checkpoint", scenario, resuming, preempt_at),
        measure("preempted, restarted", scenario, base, preempt_at),
    ]


def print_pair(title: str, size: int, plain: Result, gang: Result, *, seed_figures: bool) -> None:
    print(f"\n{title}, {size} members x 1 GPU ({-(-size // 4)} nodes of 4 GPUs):")
    print(f"  {'path':<11} {'GPU-h':>8} {'seed GPU-h':>11}   {'before':>7} {'training':>8} {'after':>6}  tries")
    for result in (plain, gang):
        seed = f"{SEED_FIGURES[result.label]:>11.1f}" if seed_figures else f"{'-':>11}"
        before, during, after = result.split()
        print(
            f"  {result.label:<11} {result.gpu_hours:>8.2f} {seed}   {before:>7.2f} {during:>8.2f} {after:>6.2f}"
            f"  {result.describe_tries()}"
        )
    line = f"  without gang / with gang: {plain.gpu_hours / gang.gpu_hours:.3f}"
    line += f" ({plain.gpu_hours - gang.gpu_hours:+.2f} GPU-h)"
    if seed_figures:
        line += f"; seed: {SEED_FIGURES['plain pods'] / SEED_FIGURES['gang']:.3f} ({112.0 - 98.5:+.1f} GPU-h)"
    print(line)


def report(story: Story, seed: int) -> dict[str, tuple[Result, ...]]:
    """Run every story, print the tables, and return the results (for the smoke test)."""
    hours = story.training_seconds / 3600
    print(
        f"seed-cost cluster: 4-GPU nodes, 1 node/min incremental scale-up, 60 s boot, scale-down after 10 idle min; "
        f"{hours:g} h training; rendezvous timeout {story.rendezvous_timeout / 60:g} min; "
        f"retry delay {story.retry_delay / 60:g} min; GPU-h billed per node from creation to deletion"
    )
    results: dict[str, tuple[Result, ...]] = {}
    print(
        "GPU-h split: before the successful try's training (idle nodes, failed tries), during it, after it"
        " (nodes idle until scale-down)"
    )
    ramp_size = max(story.sizes)
    pair = no_gang_story(story, ramp_size, stockout=False)
    print_pair(
        "Ramp (the seed's cost model 1 and 2: stock for every node)", ramp_size, *pair, seed_figures=ramp_size == 32
    )
    results[f"ramp-{ramp_size}"] = pair
    for size in story.sizes:
        pair = no_gang_story(story, size, stockout=True)
        title = f"Stockout (stock for half the GPUs until minute {story.restock_at / 60:g})"
        print_pair(title, size, *pair, seed_figures=size == 32)
        results[f"stockout-{size}"] = pair
    fraction, spot = spot_story(story, seed)
    anchor, resumed, restarted = spot
    print(
        f"\nSpot, gang of {story.spot_size} x 1 GPU on spot nodes; one member's node preempted at "
        f"{fraction:.1%} of training (seed {seed}); checkpoint every {story.checkpoint_every} steps (1 step/s):"
    )
    for result in spot:
        lost = result.gpu_hours - anchor.gpu_hours
        print(f"  {result.label:<36} {result.gpu_hours:>8.2f} GPU-h  lost {lost:>6.2f}  {result.describe_tries()}")
    trained = [record.trained_seconds / 60 for record in resumed.tries]
    print(
        f"  the resuming job's tries trained {' + '.join(f'{minutes:.1f}' for minutes in trained)} min;"
        f" the last resumed from step {resumed.checkpointed} (GANG_RESUME_STEP)"
    )
    print(
        f"  restarted / resumed: {restarted.gpu_hours / resumed.gpu_hours:.3f}; "
        f"saved by resuming: {restarted.gpu_hours - resumed.gpu_hours:.2f} GPU-h"
    )
    results["spot"] = tuple(spot)
    print(
        "\nMeasured on the emulator: node creation/deletion and billing (incremental and atomic scale-up, quota,"
        " scale-down), scheduling, the members' rendezvous timeout (simulated containers exit 1 after it), the spot"
        " preemption (GKE's termination notice: pods Failed/Terminated, the node deleted 30 s later), the kills and"
        " retries (through the API), and the resume step (the provider's reservation.checkpoint.resume_step, given"
        " to the members as GANG_RESUME_STEP, from the checkpoint step the provider's reservation.checkpoint reads"
        " in the preempted pods' termination messages). Modelled: the training itself (a simulated run time of the"
        " steps left), the rendezvous store (the job tells the members when all run) and what the trainer writes"
        " to its termination-message file (its last periodic save: a simulated container cannot save on SIGTERM)."
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--restock-minutes", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0, help="draws the preemption instant of the spot story")
    parser.add_argument("--smoke", action="store_true", help="a small version (minutes of simulated time)")
    args = parser.parse_args()
    story = SMOKE if args.smoke else dataclasses.replace(Story(), restock_at=args.restock_minutes * 60)
    report(story, args.seed)


if __name__ == "__main__":
    main()
