"""Benchmark of CRD validation rules (``x-kubernetes-validations``) on the emulator's write path.

In one process, one store: status PATCHes of a Kueue Workload (the bundled CRD, whose root rules run on
every write) against the anchor measured in the same run: the same PATCHes of a Workload served from a
copy of that CRD (group ``bench.example.com``) with every rule removed. The ratio is what evaluating the
rules costs per write.

Usage: ``.venv/bin/python -m bench.cel_rules [--writes 300]``.
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

from gang_sim.apiserver.crds import bundled_crds, install_bundled_crds
from gang_sim.apiserver.store import CRD_KEY, Store

TEMPLATE = {"spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}


def without_rules(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: without_rules(value) for key, value in node.items() if key != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_rules(item) for item in node]
    return node


def ruleless_workload_crd() -> dict[str, Any]:
    crd = next(c for c in bundled_crds() if c["metadata"]["name"] == "workloads.kueue.x-k8s.io")
    copied: dict[str, Any] = without_rules(copy.deepcopy(crd))
    copied["metadata"] = {"name": "workloads.bench.example.com"}
    copied["spec"]["group"] = "bench.example.com"
    copied.pop("status", None)
    return copied


def seconds_per_write(store: Store, group: str, writes: int) -> float:
    resource = f"{group}/v1beta2/workloads"
    body = {
        "apiVersion": f"{group}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 4, "template": TEMPLATE}]},
    }
    store.create(resource, body, "default")
    started = time.perf_counter()
    for index in range(writes):
        condition = {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "WaitingForQuota",
            "message": f"write {index}",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        store.patch(resource, "w", {"status": {"conditions": [condition]}}, namespace="default", subresource="status")
    return (time.perf_counter() - started) / writes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    store = Store(seed=0)
    install_bundled_crds(store)
    store.create(CRD_KEY, ruleless_workload_crd())
    anchor = seconds_per_write(store, "bench.example.com", args.writes)
    with_rules = seconds_per_write(store, "kueue.x-k8s.io", args.writes)
    print(f"Workload status PATCH, CRD without rules (anchor): {anchor * 1000:.2f} ms")
    print(f"Workload status PATCH, bundled CRD with its rules: {with_rules * 1000:.2f} ms ({with_rules / anchor:.1f}x)")


if __name__ == "__main__":
    main()
