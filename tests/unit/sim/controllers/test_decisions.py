"""Pure controller decisions, table-tested: pod placement, Job bookkeeping, runtime annotations."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.controllers.jobs import format_indexes, pod_manifest
from gang_sim.controllers.kubelet.simulated_runtime import RuntimeSpec, runtime_spec
from gang_sim.controllers.scheduler import GATED_MESSAGE, node_usage, place
from tests.builders import GPU_TAINT, GPU_TOLERATION, node, pod_spec

GPU_POD = pod_spec(gpus=1, tolerations=[GPU_TOLERATION])


def test_place_binds_in_creation_order_and_reports_gates_and_misses() -> None:
    nodes = [
        {
            **node("n1", gpus=1, taints=[GPU_TAINT]),
            "status": {**node("n1", gpus=1)["status"], "conditions": [{"type": "Ready", "status": "True"}]},
        }
    ]

    def pod(name: str, created: str, **spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {**GPU_POD, **spec}}

    decisions = place(
        [
            pod("late", "2026-01-01T00:00:02Z"),
            pod("early", "2026-01-01T00:00:01Z"),
            pod("gated", "2026-01-01T00:00:00Z", schedulingGates=[{"name": "example.com/gate"}]),
        ],
        nodes,
        node_usage([]),
    )
    assert [(d.pod["metadata"]["name"], d.node, d.reason) for d in decisions] == [
        ("gated", None, "SchedulingGated"),
        ("early", "n1", ""),
        ("late", None, "Unschedulable"),
    ]
    assert decisions[0].message == GATED_MESSAGE
    assert decisions[2].message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


@pytest.mark.parametrize(
    ("indexes", "text"), [(set(), ""), ({0}, "0"), ({0, 1, 2, 3, 5}, "0-3,5"), ({1, 3, 4, 7, 8, 9}, "1,3-4,7-9")]
)
def test_format_completed_indexes(indexes: set[int], text: str) -> None:
    assert format_indexes(indexes) == text


def test_indexed_pod_manifest_has_index_hostname_env_and_owner() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
        "spec": {"template": {"spec": pod_spec()}},
    }
    pod = pod_manifest(job, 3)
    assert pod["metadata"]["generateName"] == "train-3-"
    assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "3"
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "train"
    assert pod["spec"]["hostname"] == "train-3"
    assert pod["spec"]["containers"][0]["env"][0]["name"] == "JOB_COMPLETION_INDEX"
    assert pod["metadata"]["ownerReferences"][0] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, RuntimeSpec(), id="defaults"),
        pytest.param(
            {"sim.gang.dev/run-seconds": "30", "sim.gang.dev/exit-code": "3"},
            RuntimeSpec(run_seconds=30, exit_code=3),
            id="run-and-fail",
        ),
        pytest.param({"sim.gang.dev/start-seconds": "0"}, RuntimeSpec(start_seconds=0), id="instant-start"),
    ],
)
def test_runtime_spec(annotations: dict[str, str], expected: RuntimeSpec) -> None:
    assert runtime_spec({"metadata": {"annotations": annotations}}) == expected


@pytest.mark.parametrize(
    "annotations",
    [{"sim.gang.dev/run-seconds": "soon"}, {"sim.gang.dev/exit-code": "x"}, {"sim.gang.dev/start-seconds": "-1"}],
)
def test_runtime_spec_rejects_malformed_annotations(annotations: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"sim\.gang\.dev/"):
        runtime_spec({"metadata": {"annotations": annotations}})
