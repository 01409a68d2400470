"""A gang's members on the real tier, and their ends written from outside.

kwok runs no containers: a member's life is what its ``sim.gang.dev/`` annotations tell kwok's stages
(:mod:`gang_sim.testing.real.stages`). A member without ``run-seconds`` (:data:`RUNS_UNTIL_DELETED`)
runs until it is deleted; annotating a running one with ``run-seconds`` and ``exit-code`` has kwok's
exit stage end it with that code - kwok replays a pod's stage with its newest version on every change
(``pkg/kwok/controllers/pod_controller.go``, ``preprocess``). :func:`member_exits` does that from a
thread while a DAG runs, for chosen ranks of chosen tries: how a test gives one try's member an exit
code and another try's member another, from one pod template.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from airflow_provider_gang.reservation import naming
from tests.e2e.gang_dags import SIM_EXIT, SIM_RUN
from tests.real.backends import RealBackend, wait_for
from tests.real.conftest import GANG_KINDS, GANG_SELECTOR

RUNS_UNTIL_DELETED = {"spec": {"containers": [{"name": "trainer", "image": "trainer:sim", "command": ["train"]}]}}
"""A member without ``sim.gang.dev/run-seconds``: kwok keeps it running until it is deleted."""
MEMBER_SELECTOR = f"{naming.ROLE_LABEL}=member"
_RUNNING_SECONDS = 240.0


def of_gangs(objects: list[dict[str, Any]], dag_id: str) -> list[dict[str, Any]]:
    """The objects of ``objects`` whose gang is one of ``dag_id``'s (a gang's name starts with its
    DAG id, ``naming.gang_name``) - or, for a gang name, that gang's."""
    prefix = naming.to_dns_label(dag_id)
    return [
        item for item in objects if (item["metadata"].get("labels") or {}).get(naming.GANG_LABEL, "").startswith(prefix)
    ]


def gang_leftovers(cluster: RealBackend, dag_id: str) -> dict[str, list[str]]:
    """Objects of ``dag_id``'s gangs in ``default`` (ConfigMaps included), by kind."""
    found = {
        kind: [
            item["metadata"]["name"] for item in of_gangs(cluster.objects(kind, label_selector=GANG_SELECTOR), dag_id)
        ]
        for kind in (*GANG_KINDS, "v1/configmaps")
    }
    return {kind: names for kind, names in found.items() if names}


def nothing_left(cluster: RealBackend, dag_id: str, timeout: float = 120) -> None:
    """Waits until nothing of ``dag_id``'s gangs (or of the gang named ``dag_id``) is left in
    ``default``, its owner ConfigMap included; fails naming what is left after ``timeout`` seconds
    (deletion is asynchronous on the real stack: the garbage collector, kwok's graceful deletion)."""
    wait_for(lambda: not gang_leftovers(cluster, dag_id), timeout=timeout, what=f"nothing of {dag_id} left")


def of_try(objects: list[dict[str, Any]], dag_id: str, attempt: int) -> list[dict[str, Any]]:
    """The objects of try ``attempt`` of ``dag_id``'s gangs (a try's gang name carries ``-t<attempt>-``)."""
    marker = f"-t{attempt}-"
    return [item for item in of_gangs(objects, dag_id) if marker in item["metadata"]["labels"][naming.GANG_LABEL]]


def rank_of(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"][naming.RANK_LABEL])


@dataclass(frozen=True)
class Exit:
    """Rank ``rank`` of try ``attempt`` exits ``code`` a second after all ``size`` members of that try run."""

    attempt: int
    rank: int
    code: int
    size: int = 2


def _end(cluster: RealBackend, dag_id: str, planned: Exit, stop: threading.Event) -> None:
    """Once every member of the planned try runs, annotate the planned rank; nothing once ``stop`` is set
    (the block ended first: the test's own assertions say what that means)."""
    deadline = time.monotonic() + _RUNNING_SECONDS
    while not stop.is_set():
        pods = of_try(cluster.objects("v1/pods", label_selector=MEMBER_SELECTOR), dag_id, planned.attempt)
        phases = sorted((pod.get("status") or {}).get("phase") or "" for pod in pods)
        if phases == ["Running"] * planned.size:
            for pod in pods:
                if rank_of(pod) == planned.rank:
                    name = pod["metadata"]["name"]
                    exit_code = f"{SIM_EXIT}={planned.code}"
                    cluster.cluster.kubectl("annotate", "--overwrite", "pod", name, f"{SIM_RUN}=1", exit_code)
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the {planned.size} members of try {planned.attempt} of {dag_id}: {phases}")
        stop.wait(0.5)


@contextmanager
def member_exits(cluster: RealBackend, dag_id: str, plan: Sequence[Exit]) -> Iterator[None]:
    """While the block runs, end the members ``plan`` names, one after the other, from a thread; what
    went wrong in the thread (a member never seen running) is raised when the block ends."""
    stop, failures = threading.Event(), []

    def carry_out() -> None:
        try:
            for planned in plan:
                _end(cluster, dag_id, planned, stop)
        except Exception as error:  # raised again in the test's thread below
            failures.append(error)

    thread = threading.Thread(target=carry_out, name=f"exits-{dag_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
    if failures:
        raise failures[0]
