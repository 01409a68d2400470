"""The nightly burst: one DAG of many parallel gang tasks, what each may end as, and the verdict.

:func:`burst_gangs` lays out ``count`` tasks ``gang_000``... over the cluster of
``burst_scenario.yaml`` in a fixed cycle of six, sizes cycling 1, 2, 4, 3, 8:

- ``provisioning_request`` and ``gates`` gangs strictly in zone us-central1-a, which has room for
  all of them at once: they must **succeed** (``retries=2``: a try ended by a killed component is
  followed by one that adopts or withdraws its gang);
- a ``provisioning_request`` gang strictly in the saturated zone us-central1-b and a ``kueue`` gang
  in the LocalQueue ``starved`` (no GPU quota): they wait in their queue and must **fail** with
  ``deadline`` after ``reservation_timeout`` (``retries=1``; Celery queue ``waiting``, served only
  by the worker that is never killed; a try the api-server's or the database's restart ends is
  followed by one that waits again).

Every member is a simulated container running ``RUN_SECONDS`` simulated seconds.

:func:`verdict` checks, once every task has finished:

- every task ended in the state its capacity allows (above);
- every try recorded once: the task state store's ``gang.tries`` (read through the plugin's JSON
  route, ``/gang/api/reservation``) holds attempts ``1..try_number`` exactly once each, and the last
  record's outcome is ``all_succeeded`` for a success, ``deadline`` for a waiting gang;
- no duplicate (two live objects of one role of one gang at once) and no orphan (an object of any
  try's gang left once the tasks ended), from the emulator's committed changes
  (:class:`tests.reliability.emulator_side.Ledger`);
- no trigger ran twice past its handover (:func:`ran_past_handover`): a trigger (one row of Airflow's
  ``trigger`` table; a new try defers with a trigger of its own) that two triggerer jobs ran was
  fired by the earlier one, if at all, before the later one started it.
"""

from __future__ import annotations

import itertools
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_gang.reservation import naming

DAG_ID = "gang_nightly_burst"
SCENARIO = Path(__file__).with_name("burst_scenario.yaml")
TIME_SCALE = 4.0
"""Simulated seconds per real second: a node is ready 15 s after a scale-up, a member runs 20 s."""
RUN_SECONDS = 80
WAITING_TIMEOUT_SECONDS = 75
"""The waiting gangs' ``reservation_timeout`` (real seconds)."""
SIZES = (1, 2, 4, 3, 8)


@dataclass(frozen=True)
class BurstGang:
    """One task of the burst DAG: ``fits`` says whether the cluster can ever serve it."""

    task_id: str
    mode: str
    size: int
    fits: bool

    @property
    def expected_state(self) -> str:
        return "success" if self.fits else "failed"

    @property
    def expected_outcome(self) -> str:
        return "all_succeeded" if self.fits else "deadline"


CYCLE = (
    ("provisioning_request", True),
    ("gates", True),
    ("provisioning_request", False),
    ("provisioning_request", True),
    ("gates", True),
    ("kueue", False),
)


def burst_gangs(count: int) -> tuple[BurstGang, ...]:
    """``count`` tasks laid out as the module docstring says."""
    return tuple(
        BurstGang(
            f"gang_{index:03d}", CYCLE[index % len(CYCLE)][0], SIZES[index % len(SIZES)], CYCLE[index % len(CYCLE)][1]
        )
        for index in range(count)
    )


DAG_TEMPLATE = '''
"""The nightly burst of tests/production: {count} gang tasks in one DAG run (tests/production/burst.py)."""
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_provider_gang.operators import GangTrainingOperator

POD = {{
    "metadata": {{"annotations": {{"sim.gang.dev/run-seconds": "{run_seconds}"}}}},
    "spec": {{"containers": [{{"name": "trainer", "image": "trainer:sim", "command": ["train"]}}]}},
}}

with DAG(dag_id="{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         max_active_tasks=256):
    for task_id, mode, size, fits in {gangs}:
        placement = (
            {{"kueue_queue": "starved"}} if mode == "kueue"
            else {{"zone": "us-central1-a" if fits else "us-central1-b", "strict_zone": True}}
        )
        GangTrainingOperator(
            task_id=task_id, size=size, gpus=1, cpu="1", memory="1Gi", pod_template=POD, distributed="torch",
            reservation=mode, **placement, deferrable=True, kubernetes_conn_id="gang_burst",
            reservation_timeout=timedelta(minutes=10) if fits else timedelta(seconds={waiting_timeout}),
            startup_timeout=timedelta(minutes=10),
            retries=2 if fits else 1, retry_delay=timedelta(seconds=5),
            queue="default" if fits else "waiting",
        )
'''


def write_dag(folder: Path, gangs: tuple[BurstGang, ...]) -> None:
    """Write the burst DAG file into ``folder``."""
    plain = repr(tuple((gang.task_id, gang.mode, gang.size, gang.fits) for gang in gangs))
    text = DAG_TEMPLATE.format(
        count=len(gangs),
        run_seconds=RUN_SECONDS,
        dag_id=DAG_ID,
        gangs=plain,
        waiting_timeout=WAITING_TIMEOUT_SECONDS,
    )
    (folder / "gang_nightly_burst.py").write_text(textwrap.dedent(text))


def gang_names(gang: BurstGang, run_id: str, tries: int) -> list[str]:
    """The gang name of each try of ``gang``'s task (deterministic per try, ``reservation.naming``)."""
    return [naming.gang_name(DAG_ID, gang.task_id, run_id, attempt=attempt) for attempt in range(1, tries + 1)]


DUPLICATE_OF = re.compile(r"of the same role of gang (?P<gang>\S+) is live")
"""The gang a :class:`~tests.reliability.emulator_side.Ledger` duplicate names."""
TRIGGER_ID = re.compile(r"\(ID (?P<id>\d+)\)")
FIRED_PHASE = re.compile(r"'phase': '(?P<phase>[a-z_]+)'")


@dataclass(frozen=True)
class TriggerRun:
    """One trigger (its row id in Airflow's ``trigger`` table) as one triggerer job ran it."""

    trigger: int
    job: str
    started: str
    """The timestamp of its ``... (ID n) starting`` line (``triggerer_job_runner.py``)."""
    fired: str
    """The timestamp of its ``Trigger fired event`` line, ``""`` if it fired none in this job."""
    phase: str


def trigger_runs(trigger_logs: dict[str, str]) -> list[TriggerRun]:
    """Every run of a trigger by a triggerer job in the trigger log files (``attempt=N.log.trigger.<job
    id>.log``: one per attempt and job; Airflow's structured JSON lines, RFC 3339 timestamps that order
    as strings)."""
    runs: dict[tuple[int, str], dict[str, str]] = {}
    for path, text in trigger_logs.items():
        job = path.rsplit(".trigger.", 1)[-1].removesuffix(".log")
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            event = str(entry.get("event", ""))
            named = TRIGGER_ID.search(event if event.endswith(" starting") else str(entry.get("name", "")))
            if named is None:
                continue
            run = runs.setdefault((int(named["id"]), job), {"started": "", "fired": "", "phase": ""})
            if event.endswith(" starting"):
                run["started"] = run["started"] or str(entry["timestamp"])
            elif event == "Trigger fired event" and not run["fired"]:
                phase = FIRED_PHASE.search(str(entry.get("result", "")))
                run.update(fired=str(entry["timestamp"]), phase=phase["phase"] if phase else "?")
    return [TriggerRun(trigger, job, **run) for (trigger, job), run in sorted(runs.items())]


def ran_past_handover(runs: list[TriggerRun]) -> tuple[list[str], list[str]]:
    """``(past handover, fired again after handover)`` among triggers run by more than one job.

    Past its handover: a job fired the trigger at or after another job had started it - both ran it
    at once. Fired again: the earlier job fired before the next one started it, and its event was not
    committed (the job was killed, or its database went away), so the next job ran the trigger again
    and fired it again; Airflow allows that ("you must assume that duplicates of your trigger instance
    may run simultaneously", https://airflow.apache.org/docs/apache-airflow/stable/authoring-and-scheduling/deferring.html).
    """
    by_trigger: dict[int, list[TriggerRun]] = {}
    for run in runs:
        by_trigger.setdefault(run.trigger, []).append(run)
    past, again = [], []
    for trigger, handed in sorted(by_trigger.items()):
        handed.sort(key=lambda run: run.started)
        for earlier, later in itertools.pairwise(handed):
            if earlier.fired and earlier.fired >= later.started:
                past.append(
                    f"trigger {trigger}: job {earlier.job} fired {earlier.phase} at {earlier.fired}, "
                    f"after job {later.job} started it at {later.started}"
                )
            elif earlier.fired and later.fired:
                again.append(
                    f"trigger {trigger} ({earlier.phase}): job {earlier.job} fired at {earlier.fired}, "
                    f"job {later.job} started it at {later.started} and fired at {later.fired}"
                )
    return past, again


@dataclass
class Verdict:
    """What the burst broke (every list must be empty) and what it did."""

    gangs: int = 0
    tries: int = 0
    wrong_states: list[str] = field(default_factory=list)
    misrecorded: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    fired_twice: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [*self.wrong_states, *self.misrecorded, *self.duplicates, *self.orphans, *self.fired_twice]

    def add(self, other: Verdict) -> None:
        """Count ``other`` (one task's verdict) in this one."""
        self.tries += other.tries
        for name in ("wrong_states", "misrecorded", "duplicates", "orphans", "fired_twice"):
            getattr(self, name).extend(getattr(other, name))


def check_task(gang: BurstGang, task: dict[str, Any], stored: dict[str, Any], verdict: Verdict) -> None:
    """Add to ``verdict`` what one finished task broke: its state and its recorded tries."""
    state, try_number = task["state"], int(task["try_number"])
    verdict.tries += try_number
    if state != gang.expected_state:
        verdict.wrong_states.append(f"{gang.task_id} ({gang.mode}, fits={gang.fits}) ended {state}")
    tries = stored.get("tries") or []
    attempts = [record.get("attempt") for record in tries]
    if attempts != list(range(1, try_number + 1)):
        verdict.misrecorded.append(f"{gang.task_id}: try number {try_number}, recorded attempts {attempts}")
    elif tries[-1].get("outcome") != gang.expected_outcome:
        verdict.misrecorded.append(
            f"{gang.task_id}: last try recorded {tries[-1].get('outcome')!r}, expected {gang.expected_outcome!r}"
        )
