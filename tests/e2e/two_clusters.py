"""Two emulated clusters for ``OtherCluster`` tests (``tests/e2e/test_other_cluster.py``,
``tests/versions/test_other_cluster_history.py``): cluster A (``kubernetes_default``) has no GPU node
and cannot get one, so a check-capacity request with ``noRetry`` ends ``capacity_not_found`` at once;
cluster B (:data:`B_CONN`) has four idle 1-GPU nodes and books capacity for an hour. Imports nothing
that needs Airflow 3.2 or later, so the ``make versions`` venvs can use it.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation.fallback import OtherCluster
from demo.cluster import CONN_ID
from gang_sim.testing import ClusterHarness
from tests.builders import GPU_TAINT

B_CONN = "gang_cluster_b"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
QUICK = {"retry_attempts": 2, "retry_base_delay": 0.05, "retry_max_delay": 0.1, "request_timeout": 5.0}
NO_GPUS: dict[str, Any] = {
    "name": "no-gpus",
    "description": "cluster A: one CPU node, no GPU pool",
    "seed": 5,
    "nodePools": [
        {"name": "cpu", "zone": "zone-a", "cpu": "8", "memory": "32Gi", "minNodes": 1, "maxNodes": 1, "initialNodes": 1}
    ],
}
FOUR_GPUS: dict[str, Any] = {
    "name": "four-gpus",
    "description": "cluster B: four idle 1-GPU nodes (minNodes: the autoscaler keeps them while idle)",
    "seed": 6,
    # A booking outlasts a loaded machine's launch: the default 600 simulated s are 10 s at time_scale=60,
    # and a CI run with both lanes busy once took longer than that from Provisioned to the pods bound.
    "autoscaler": {"bookingSeconds": 3600},
    "nodePools": [
        {
            "name": "gpu",
            "zone": "zone-b",
            "gpuType": "nvidia-l4",
            "gpusPerNode": 1,
            "cpu": "8",
            "memory": "32Gi",
            "taints": [GPU_TAINT],
            "minNodes": 4,
            "maxNodes": 4,
            "initialNodes": 4,
        }
    ],
}
ARGUMENTS: dict[str, Any] = {
    "size": 2,
    "gpus": 1,
    "provisioning_class": CHECK_CAPACITY,
    "provisioning_parameters": {"noRetry": "true"},
    "fallbacks": [OtherCluster(B_CONN)],
    "client_options": QUICK,
    "kubernetes_conn_id": CONN_ID,
}


def two_clusters(cluster_factory: Any) -> tuple[ClusterHarness, ClusterHarness]:
    return cluster_factory(NO_GPUS, time_scale=60), cluster_factory(FOUR_GPUS, time_scale=60, conn_id=B_CONN)
