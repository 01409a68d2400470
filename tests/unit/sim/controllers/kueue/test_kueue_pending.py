"""gang_sim.controllers.kueue.pending: Kueue 0.20's typed QuotaReserved=False reasons and flavorassigner's messages."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gang_sim.controllers.kueue import pending, quota
from tests.unit.sim.controllers.kueue.test_kueue_decisions import FLAVORS, cluster_queue, pod_set_request

PREFIX = "couldn't assign flavors to pod set main: "


@pytest.mark.parametrize(
    ("count", "minimum", "used", "expected"),
    [
        pytest.param(
            6,
            None,
            0,
            (
                "ExceedsMaxQuota",
                "insufficient quota for nvidia.com/gpu in flavor l4, request > maximum capacity (6 > 4)",
            ),
            id="above-the-queue",
        ),
        pytest.param(
            3,
            None,
            2,
            ("WaitingForQuota", "insufficient unused quota for nvidia.com/gpu in flavor l4, 1 more needed"),
            id="others-hold-quota",
        ),
        pytest.param(
            8,
            3,
            2,
            ("WaitingForQuota", "insufficient unused quota for nvidia.com/gpu in flavor l4, 1 more needed"),
            id="partial-admission-needs-its-minimum",
        ),
        pytest.param(
            8,
            6,
            0,
            (
                "ExceedsMaxQuota",
                "insufficient quota for nvidia.com/gpu in flavor l4, request > maximum capacity (6 > 4)",
            ),
            id="minimum-above-the-queue",
        ),
    ],
)
def test_reason_and_message(count: int, minimum: int | None, used: int, expected: tuple[str, str]) -> None:
    queue = cluster_queue("cq", "4")
    usage = {("cq", "l4", "nvidia.com/gpu"): Fraction(used)}
    assert quota.assign([pod_set_request(count, minimum)], queue, [queue], FLAVORS, usage) is None
    reason, message = pending.reason_and_message([pod_set_request(count, minimum)], queue, [queue], FLAVORS, usage)
    assert (reason, message) == (expected[0], PREFIX + expected[1])


def test_the_cohort_counts_toward_the_maximum() -> None:
    mine, other = cluster_queue("mine", "4", cohort="team"), cluster_queue("other", "4", cohort="team")
    usage = {("other", "l4", "nvidia.com/gpu"): Fraction(4)}
    assert pending.reason_and_message([pod_set_request(6)], mine, [mine, other], FLAVORS, usage)[0] == "WaitingForQuota"
    assert pending.reason_and_message([pod_set_request(9)], mine, [mine, other], FLAVORS, {})[0] == "ExceedsMaxQuota"


def test_no_flavor_the_pods_suit_is_no_matching_flavor() -> None:
    queue = cluster_queue("cq", "4", flavors=("a100",))  # tainted: the pod does not tolerate it
    assert pending.reason_and_message([pod_set_request(1)], queue, [queue], FLAVORS, {}) == (
        "NoMatchingFlavor",
        PREFIX + "no flavor of ClusterQueue cq matches the pods' node selector and tolerations (flavors: a100)",
    )


def test_a_resource_no_group_covers_is_named() -> None:
    queue = cluster_queue("cq", "4")
    spec = {"containers": [{"name": "main", "resources": {"requests": {"example.com/fpga": "1"}}}]}
    assert pending.reason_and_message([pod_set_request(1, spec=spec)], queue, [queue], FLAVORS, {}) == (
        "ExceedsMaxQuota",
        PREFIX + "resource example.com/fpga unavailable in ClusterQueue",
    )
