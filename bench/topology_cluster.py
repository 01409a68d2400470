"""Scenarios of racks of 4-GPU hosts that the topology tests and the bench write for themselves (none is
a named scenario of the repository): GKE's topology labels on every node, a Kueue ``Topology`` with a
TAS flavor behind queue ``tas`` and a flavor without one behind queue ``plain``, the Workload API's
topology gate on, and plain pods of another team holding GPUs on given racks.

:func:`one_rack_document` is the "Done when" cluster: exactly one rack (``rack-y1``) can hold a gang
of 4 one-GPU members, no rack one of 5, each block one of 6. Free GPUs per rack (fillers are 2 or 3
GPUs, so a 3 needs a host of its own and the free room per host is the same on every backend):

=========  =========  ===============  ====
block      rack       held             free
=========  =========  ===============  ====
block-x    rack-x1    3 + 2 (2 hosts)  3
block-x    rack-x2    1 + 0 (1 host)   3
block-y    rack-y1    2 + 2 (2 hosts)  4
block-y    rack-y2    3 + 3 (2 hosts)  2
=========  =========  ===============  ====
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

BLOCK = "cloud.google.com/gce-topology-block"
RACK = "cloud.google.com/gce-topology-subblock"
GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
ONE_RACK_FILLERS: Mapping[str, Sequence[int]] = {
    "rack-x1": (3, 2),
    "rack-x2": (1,),
    "rack-y1": (2, 2),
    "rack-y2": (3, 3),
}
ONE_RACK_HOSTS: Mapping[str, int] = {"rack-x1": 2, "rack-x2": 1, "rack-y1": 2, "rack-y2": 2}


def gpu_pool(rack: str, hosts: int, *, max_hosts: int | None = None, delay: float = 30) -> dict[str, Any]:
    """A pool of ``hosts`` 4-GPU hosts in ``rack`` of block ``block-<rack's letter>`` (autoscaled up to
    ``max_hosts`` when given)."""
    return {
        "name": rack,
        "zone": "us-central1-a",
        "gpuType": "nvidia-h100-80gb",
        "gpusPerNode": 4,
        "cpu": "48",
        "memory": "192Gi",
        "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
        "minNodes": hosts,
        "maxNodes": max_hosts if max_hosts is not None else hosts,
        "initialNodes": hosts,
        "provisioningDelaySeconds": delay,
        "topology": {"block": f"block-{rack.split('-')[1][0]}", "subblock": rack},
    }


def filler(name: str, rack: str, gpus: int) -> dict[str, Any]:
    """A plain pod of another team holding ``gpus`` in ``rack`` for as long as the cluster runs."""
    resources = {"requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "filler"}},
        "spec": {
            "nodeSelector": {RACK: rack},
            "tolerations": [dict(GPU_TOLERATION)],
            "containers": [{"name": "hold", "image": "registry.k8s.io/pause:3.10", "resources": resources}],
        },
    }


def kueue_objects(gpus: int = 64) -> list[dict[str, Any]]:
    """Topology ``racks`` (block, rack, hostname), flavor ``tas-gpu`` with it behind queue ``tas``, and
    flavor ``gpu`` without one behind queue ``plain``."""
    kueue = "kueue.x-k8s.io/v1beta2"
    flavor_spec = {
        "nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        "tolerations": [GPU_TOLERATION],
    }
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": kueue,
            "kind": "Topology",
            "metadata": {"name": "racks"},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]},
        },
        {
            "apiVersion": kueue,
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas-gpu"},
            "spec": {**flavor_spec, "topologyName": "racks"},
        },
        {"apiVersion": kueue, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": flavor_spec},
    ]
    for queue, flavor in (("tas", "tas-gpu"), ("plain", "gpu")):
        quota = [
            {"name": "cpu", "nominalQuota": "1000"},
            {"name": "memory", "nominalQuota": "4000Gi"},
            {"name": GPU, "nominalQuota": str(gpus)},
        ]
        groups = [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": flavor, "resources": quota}]}]
        objects.append(
            {
                "apiVersion": kueue,
                "kind": "ClusterQueue",
                "metadata": {"name": queue},
                "spec": {"namespaceSelector": {}, "resourceGroups": groups},
            }
        )
        objects.append(
            {
                "apiVersion": kueue,
                "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": "default"},
                "spec": {"clusterQueue": queue},
            }
        )
    return objects


def document(
    name: str,
    pools: Sequence[dict[str, Any]],
    fillers: Mapping[str, Sequence[int]],
    *,
    gate: bool = True,
) -> dict[str, Any]:
    """A scenario: a CPU node, the GPU ``pools``, the Kueue objects, and ``fillers`` (rack -> GPUs each)."""
    cpu_pool = {
        "name": "cpu",
        "zone": "us-central1-a",
        "cpu": "16",
        "memory": "64Gi",
        "minNodes": 1,
        "maxNodes": 1,
        "initialNodes": 1,
    }
    pods = [
        filler(f"fill-{rack}-{index}", rack, gpus) for rack, held in fillers.items() for index, gpus in enumerate(held)
    ]
    scenario: dict[str, Any] = {
        "name": name,
        "description": "racks of 4-GPU hosts written by a topology test",
        "seed": 35,
        "nodePools": [cpu_pool, *pools],
        "autoscaler": {"scaleDownUnneededSeconds": 3600},
        "kueue": {"waitForPodsReadyTimeoutSeconds": 600},
        "localProcessImages": ["python:*"],
        "objects": [*kueue_objects(), *pods],
    }
    if gate:
        scenario["featureGates"] = {"TopologyAwareWorkloadScheduling": True}
    return scenario


def one_rack_document(*, gate: bool = True) -> dict[str, Any]:
    """The "Done when" cluster (module docstring)."""
    pools = [gpu_pool(rack, hosts) for rack, hosts in ONE_RACK_HOSTS.items()]
    return document("one-rack", pools, ONE_RACK_FILLERS, gate=gate)


HALF_FULL_FILLERS: Mapping[str, Sequence[int]] = {
    "rack-a1": (4, 4, 4),
    "rack-a2": (2, 2, 2, 2, 2, 2),
    "rack-a3": (3, 3, 3, 3),
    "rack-a4": (4, 4),
    "rack-b1": (3, 3, 3, 3, 3, 3),
    "rack-b2": (2, 2, 2, 2, 2, 2),
    "rack-b3": (4, 4, 4, 2),
    "rack-b4": (3, 3, 3, 3, 2, 2),
}
"""GPUs held by other teams' pods per rack of six 4-GPU hosts: 104 of 192 held; the racks have 12,
12, 12, 16, 6, 12, 10 and 8 GPUs free, so only ``rack-a4`` holds a gang of 16 one-GPU members."""
HALF_FULL_HOSTS = 6


def half_full_document() -> dict[str, Any]:
    """The bench's cluster (``bench/topology.py``): two blocks of four racks of six 4-GPU hosts, a bit
    over half of the GPUs held (:data:`HALF_FULL_FILLERS`), the autoscaler scanning every 2 s."""
    pools = [gpu_pool(rack, HALF_FULL_HOSTS) for rack in HALF_FULL_FILLERS]
    scenario = document("half-full", pools, HALF_FULL_FILLERS)
    scenario["autoscaler"] = {**scenario["autoscaler"], "scanIntervalSeconds": 2}
    return scenario


def write(path: Path, scenario: Mapping[str, Any]) -> Path:
    """``scenario`` as a YAML file at ``path``."""
    path.write_text(yaml.safe_dump(dict(scenario), sort_keys=False))
    return path
