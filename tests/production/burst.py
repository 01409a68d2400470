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
- no trigger ran twice past its handover: each trigger event (``Gang <gang>: <phase> (<reason>)``,
  logged by the trigger when it fires, ``triggers/base.py``) appears in the trigger log of at most
  one triggerer job (``attempt=N.log.trigger.<job id>.log``).
"""

from __future__ import annotations

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


EVENT_LINE = re.compile(r"Gang (?P<gang>[a-z0-9-]+): (?P<phase>reserved|succeeded|failed) \((?P<reason>[a-z_]+)\)")


def events_by_triggerer(trigger_logs: dict[str, str]) -> dict[tuple[str, str], set[str]]:
    """``(gang, phase) -> {trigger log file}`` of every trigger event line (one file per triggerer job
    and attempt)."""
    seen: dict[tuple[str, str], set[str]] = {}
    for path, text in trigger_logs.items():
        job = path.rsplit(".trigger.", 1)[-1]
        for match in EVENT_LINE.finditer(text):
            seen.setdefault((match["gang"], match["phase"]), set()).add(job)
    return seen


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
