"""A worker process for try 1, to be killed: ``python -m tests.real.worker STATE DAG MODE [RUN_SECONDS]``.

As ``tests/reliability/worker.py``, on the real tier: it runs try 1 of the fault rows' task
(:func:`tests.real.proxied.gang_operator`) in blocking mode through the fault proxy's connection (the
``AIRFLOW_CONN_KUBERNETES_FAULT_PROXY`` it inherits), keeping the task's state in the JSON file
``STATE``, so the parent can kill it at any point and run try 2 itself with the same state. Its
members run ``RUN_SECONDS`` (default 5) once started.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e.gang_dags import simulated_pod
from tests.real.proxied import gang_operator
from tests.reliability.worker import context


def main() -> None:
    state, dag_id, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    run_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    task = gang_operator(mode, retries=1, deferrable=False, pod_template=simulated_pod(run_seconds))
    task.execute(context(state, dag_id, 1))


if __name__ == "__main__":
    main()
