"""Pure controller decisions, table-tested: request states, backoff, packing, Job bookkeeping, runtime."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.sim.controllers.autoscaler import provisioning as pr
from airflow_provider_gang.sim.controllers.autoscaler.scaleup import (
    Bin,
    GroupOption,
    pack,
    plan_atomic,
    plan_incremental,
)
from airflow_provider_gang.sim.controllers.jobs import format_indexes, pod_manifest
from airflow_provider_gang.sim.controllers.kubelet import RuntimeSpec, runtime_spec
from airflow_provider_gang.sim.controllers.scheduler import GATED_MESSAGE, node_usage, place
from tests.unit.sim_controllers.builders import GPU_TAINT, GPU_TOLERATION, node, pod_spec


def _request(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": kind, "status": status} for kind, status in conditions]}}


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        pytest.param((), pr.State.NEW, id="new"),
        pytest.param((("Accepted", "True"),), pr.State.ACCEPTED, id="accepted"),
        pytest.param((("Accepted", "True"), ("Provisioned", "False")), pr.State.PENDING_RETRY, id="pending-retry"),
        pytest.param((("Accepted", "True"), ("Provisioned", "True")), pr.State.PROVISIONED, id="provisioned"),
        pytest.param((("Provisioned", "True"), ("BookingExpired", "True")), pr.State.BOOKING_EXPIRED, id="expired"),
        pytest.param((("BookingExpired", "True"), ("CapacityRevoked", "True")), pr.State.REVOKED, id="revoked"),
        pytest.param((("Provisioned", "False"), ("Failed", "True")), pr.State.FAILED, id="failed-wins"),
    ],
)
def test_classify_request(conditions: tuple[tuple[str, str], ...], state: pr.State) -> None:
    assert pr.classify(_request(*conditions)) is state


def test_retry_delay_doubles_to_the_cap() -> None:
    delays = [pr.retry_delay(attempt, initial=60, maximum=600) for attempt in range(1, 7)]
    assert delays == [60, 120, 240, 480, 600, 600]


def test_consumed_request_reads_new_and_deprecated_keys() -> None:
    new = {"metadata": {"annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "a"}}}
    old = {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/consume-provisioning-request": "b"}}}
    assert (pr.consumed_request(new), pr.consumed_request(old), pr.consumed_request({})) == ("a", "b", None)


@pytest.mark.parametrize(("value", "ok"), [(None, True), ("600", True), ("0", False), ("604801", False), ("x", False)])
def test_max_run_duration_validation(value: str | None, ok: bool) -> None:
    request = {"spec": {"parameters": {} if value is None else {"maxRunDurationSeconds": value}}}
    if ok:
        assert pr.max_run_duration(request) == (604800 if value is None else float(value))
    else:
        with pytest.raises(ValueError, match="maxRunDurationSeconds"):
            pr.max_run_duration(request)


GPU_POD = pod_spec(gpus=1, tolerations=[GPU_TOLERATION])
FOUR_GPU_TEMPLATE = node("template", gpus=4, cpu="48", memory="192Gi", taints=[GPU_TAINT])


def test_pack_fills_first_fit_and_reports_leftovers() -> None:
    bins = [Bin.empty(node("a", gpus=1, taints=[GPU_TAINT])), Bin.empty(node("b", gpus=2, taints=[GPU_TAINT]))]
    assert len(pack([GPU_POD] * 5, bins)) == 2


@pytest.mark.parametrize(
    ("pods", "headroom", "plan"),
    [
        pytest.param(8, 8, ("gpu4", 2), id="8-pods-on-2-nodes"),
        pytest.param(9, 2, None, id="all-or-nothing-over-headroom"),
        pytest.param(1, 1, ("gpu4", 1), id="one-pod"),
    ],
)
def test_plan_atomic(pods: int, headroom: int, plan: tuple[str, int] | None) -> None:
    assert plan_atomic([GPU_POD] * pods, [GroupOption("gpu4", FOUR_GPU_TEMPLATE, headroom)]) == plan


def test_plan_atomic_ignores_pools_the_pods_do_not_fit() -> None:
    cpu_group = GroupOption("cpu", node("cpu-template"), 10)
    assert plan_atomic([GPU_POD] * 4, [cpu_group, GroupOption("gpu4", FOUR_GPU_TEMPLATE, 1)]) == ("gpu4", 1)
    assert plan_atomic([GPU_POD], [cpu_group]) is None


def test_plan_incremental_respects_budget() -> None:
    assert plan_incremental([GPU_POD] * 32, [GroupOption("gpu4", FOUR_GPU_TEMPLATE, 8)], budget=1) == [("gpu4", 1)]


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
