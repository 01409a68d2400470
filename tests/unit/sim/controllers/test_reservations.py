"""GKE specific reservations in the fit filters: a reserved node is a node like any other - it takes
every pod that fits (the real kube-scheduler knows no reservations) - and a pod that selects the
reservation fits only its nodes, by ordinary node affinity."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.controllers import fit
from gang_sim.world.cloud import RESERVATION_LABEL
from gang_sim.world.scenario import ScenarioError, parse_scenario

RESERVED = {"metadata": {"name": "n", "labels": {RESERVATION_LABEL: "r1", "pool": "a"}}, "status": {}}
OTHER_RESERVATION = {"metadata": {"name": "o", "labels": {RESERVATION_LABEL: "r2", "pool": "a"}}, "status": {}}
PLAIN = {"metadata": {"name": "m", "labels": {"pool": "a"}}, "status": {}}


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    node_selector = {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": node_selector}}}


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


SELECTS_R1 = {"nodeSelector": {RESERVATION_LABEL: "r1"}}


@pytest.mark.parametrize(
    ("pod_spec", "node", "failures"),
    [
        pytest.param({}, RESERVED, [], id="a-pod-selecting-nothing-fits-a-reserved-node"),
        pytest.param(_affinity([_in("pool", "a")]), RESERVED, [], id="affinity-without-reservation"),
        pytest.param(SELECTS_R1, RESERVED, [], id="node-selector"),
        pytest.param(_affinity([_in(RESERVATION_LABEL, "r0", "r1")]), RESERVED, [], id="affinity-in"),
        pytest.param(SELECTS_R1, OTHER_RESERVATION, [fit.AFFINITY_MISMATCH], id="other-reservation"),
        pytest.param(SELECTS_R1, PLAIN, [fit.AFFINITY_MISMATCH], id="no-reservation-node"),
        pytest.param(
            _affinity([_in(RESERVATION_LABEL, "r1")]), PLAIN, [fit.AFFINITY_MISMATCH], id="affinity-on-a-plain-node"
        ),
    ],
)
def test_a_reservation_is_selected_by_node_affinity_and_excludes_no_pod(
    pod_spec: dict[str, Any], node: dict[str, Any], failures: list[str]
) -> None:
    assert fit.fit_failures(pod_spec, {}, node, {}) == failures


def _pool(**extra: Any) -> dict[str, Any]:
    return {"name": "r", "zone": "z", "gpuType": "nvidia-l4", "gpusPerNode": 1, **extra}


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        (_pool(reservation="Bad_Name"), "is not a DNS-1123 label"),
        (_pool(reservation="r", spot=True), "do not consume reservations"),
        (_pool(reservation="r", queuedProvisioning=True), "do not consume reservations"),
    ],
)
def test_the_reservation_field_is_validated(pool: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as error:
        parse_scenario({"nodePools": [pool]})
    assert error.value.field == "nodePools[0].reservation"
    assert message in error.value.message


def test_a_reserved_pool_labels_its_nodes() -> None:
    from gang_sim.world.cloud import NodeRecord, node_manifest

    scenario = parse_scenario({"nodePools": [_pool(reservation="l4-reservation")]})
    node = node_manifest(scenario.node_pools[0], NodeRecord("n", "r", 1, 0, 0))
    assert node["metadata"]["labels"][RESERVATION_LABEL] == "l4-reservation"


def test_the_shipped_reserved_scenario() -> None:
    from gang_sim.world.scenario import load_scenario

    scenario = load_scenario("reserved")
    pools = {pool.name: pool for pool in scenario.node_pools}
    assert set(pools) == {"cpu", "l4-reserved", "l4-on-demand", "l4-spot"}
    reserved = pools["l4-reserved"]
    assert (reserved.reservation, reserved.max_nodes, reserved.gpus_per_node) == ("l4-reservation", 2, 4)
    assert pools["l4-spot"].spot and pools["l4-spot"].reservation is None
    assert pools["l4-on-demand"].reservation is None and not pools["l4-on-demand"].spot
