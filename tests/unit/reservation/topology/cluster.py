"""Nodes and pods of a small GPU cluster for the pure topology tests: racks of 4-GPU hosts.

``racks({"rack-a1": (1, 1), "rack-b1": (2, 4)})`` gives each rack its hosts with that many GPUs free
(the rest held by a bound filler pod), block ``block-<rack letter>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_gang.reservation.topology.labels import BLOCK, SUBBLOCK
from tests.builders import GPU_TAINT, gpu_pod_spec, node, pod, pod_spec

GPUS_PER_HOST = 4


def ready_node(name: str, labels: Mapping[str, str], *, gpus: int = GPUS_PER_HOST, **options: Any) -> dict[str, Any]:
    """A Ready GPU node (tainted as GPU nodes are) with ``labels``."""
    built = node(name, cpu="48", memory="192Gi", gpus=gpus, labels=dict(labels), taints=[dict(GPU_TAINT)], **options)
    built["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return built


def filler(name: str, node_name: str, gpus: int, *, phase: str = "Running", namespace: str = "other") -> dict[str, Any]:
    """A pod of another team bound to ``node_name``, holding ``gpus``."""
    spec = pod_spec(cpu="1", memory="1Gi", gpus=gpus, nodeName=node_name)
    made = pod(name, spec=spec, namespace=namespace)
    made["status"] = {"phase": phase}
    return made


def racks(free: Mapping[str, tuple[int, ...]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes and fillers: each rack's hosts with the GPUs free listed (in host order)."""
    nodes, pods = [], []
    for rack, hosts in free.items():
        for index, gpus_free in enumerate(hosts):
            name = f"{rack}-h{index}"
            nodes.append(ready_node(name, {BLOCK: f"block-{rack[5]}", SUBBLOCK: rack}))
            if gpus_free < GPUS_PER_HOST:
                pods.append(filler(f"fill-{name}", name, GPUS_PER_HOST - gpus_free))
    return nodes, pods


MEMBER = gpu_pod_spec()
"""A member: 1 GPU, 1 CPU, 1 Gi, tolerating the GPU taint."""
