"""A worker process for one try, to be killed: ``python -m tests.reliability.worker STATE DAG MODE``.

It runs try 1 of ``DAG``'s ``train`` task in blocking mode against the cluster of the
``AIRFLOW_CONN_KUBERNETES_DEFAULT`` connection it inherits, keeping the task's state in the JSON
file ``STATE`` (:class:`FileStateStore`, standing in for Airflow's task state store, which also
outlives the worker process), so the parent can kill it at any point and run try 2 itself.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from airflow_provider_gang.operators import GangTrainingOperator
from tests.e2e.driving import FakeTaskInstance, context_for
from tests.e2e.gang_dags import simulated_pod
from tests.reliability.harness import QUICK_CLIENT


class FileStateStore:
    """``get``/``set``/``delete`` of Airflow's ``TaskStateStoreAccessor``, in one JSON file, written
    atomically (a process killed mid-write leaves the previous content)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, Any]:
        return dict(json.loads(self.path.read_text())) if self.path.exists() else {}

    def _save(self, values: dict[str, Any]) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.path.parent)
        with os.fdopen(handle, "w") as file:
            json.dump(values, file)
        os.replace(temporary, self.path)

    def get(self, key: str, default: Any = None) -> Any:
        return self._load().get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._save({**self._load(), key: value})

    def delete(self, key: str) -> None:
        values = self._load()
        values.pop(key, None)
        self._save(values)


def operator(mode: str, *, deferrable: bool) -> GangTrainingOperator:
    """The task both the worker process and the test's own retry run."""
    return GangTrainingOperator(
        task_id="train",
        size=2,
        gpus=1,
        pod_template=simulated_pod(5),
        reservation=mode,
        distributed="torch",
        deferrable=deferrable,
        retries=1,
        client_options=QUICK_CLIENT,
    )


def context(state: Path, dag_id: str, try_number: int) -> dict[str, Any]:
    values = context_for(FakeTaskInstance(dag_id, "run-1", try_number=try_number))
    values["task_state_store"] = FileStateStore(state)
    return values


def main() -> None:
    state, dag_id, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    operator(mode, deferrable=False).execute(context(state, dag_id, 1))


if __name__ == "__main__":
    main()
