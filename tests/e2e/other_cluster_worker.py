"""A worker process to be killed on its way to the second cluster:
``python -m tests.e2e.other_cluster_worker STATE DAG``.

It runs try 1 of ``DAG``'s ``train`` task in blocking mode (cluster A of the
``AIRFLOW_CONN_KUBERNETES_DEFAULT`` connection it inherits stocks out), then try 2, which moves to
cluster B (``AIRFLOW_CONN_GANG_CLUSTER_B``) - keeping the task's state in the JSON file ``STATE``
(``tests.reliability.worker.FileStateStore``), so the parent can kill it while try 2 withdraws on A
and reserves on B, and run try 3 itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

from airflow_provider_gang.operators.failures import GangTryFailed
from tests.e2e.test_other_cluster import failover_operator
from tests.reliability.worker import context


def main() -> None:
    state, dag_id = Path(sys.argv[1]), sys.argv[2]
    operator = failover_operator(deferrable=False)
    try:
        operator.execute(context(state, dag_id, 1))
    except GangTryFailed as failed:
        print(f"try 1 failed as expected: {failed}", flush=True)
    else:
        raise SystemExit("try 1 was expected to stock out on cluster A")
    operator.execute(context(state, dag_id, 2))


if __name__ == "__main__":
    main()
