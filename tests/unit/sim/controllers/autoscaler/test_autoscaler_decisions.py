"""Pure autoscaler decisions, table-tested: ProvisioningRequest states, retry backoff, packing, scale-up plans."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.controllers.autoscaler import provisioning as pr
from gang_sim.controllers.autoscaler.scaleup import (
    Bin,
    GroupOption,
    pack,
    plan_atomic,
    plan_incremental,
)
from tests.builders import GPU_TAINT, GPU_TOLERATION, node, pod_spec


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
