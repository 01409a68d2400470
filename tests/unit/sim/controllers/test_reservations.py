"""GKE specific reservations in the fit filters: a reserved node takes only pods selecting it."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.controllers import fit
from gang_sim.world.scenario import ScenarioError, parse_scenario

RESERVED = {"metadata": {"name": "n", "labels": {fit.RESERVATION_LABEL: "r1", "pool": "a"}}, "status": {}}
PLAIN = {"metadata": {"name": "m", "labels": {"pool": "a"}}, "status": {}}


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    node_selector = {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": node_selector}}}


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


@pytest.mark.parametrize(
    ("pod_spec", "node", "allowed"),
    [
        pytest.param({}, PLAIN, True, id="no-reservation-node"),
        pytest.param({}, RESERVED, False, id="unselected"),
        pytest.param({"nodeSelector": {fit.RESERVATION_LABEL: "r1"}}, RESERVED, True, id="node-selector"),
        pytest.param({"nodeSelector": {fit.RESERVATION_LABEL: "r2"}}, RESERVED, False, id="other-reservation"),
        pytest.param(_affinity([_in(fit.RESERVATION_LABEL, "r0", "r1")]), RESERVED, True, id="affinity-in"),
        pytest.param(_affinity([_in("pool", "a")]), RESERVED, False, id="affinity-without-reservation"),
        pytest.param(
            _affinity([_in("pool", "a")], [_in(fit.RESERVATION_LABEL, "r1")]), RESERVED, True, id="second-term"
        ),
        pytest.param(
            _affinity([{"key": fit.RESERVATION_LABEL, "operator": "Exists"}]),
            RESERVED,
            False,
            id="exists-is-not-specific",
        ),
    ],
)
def test_selects_reservation(pod_spec: dict[str, Any], node: dict[str, Any], allowed: bool) -> None:
    assert fit.selects_reservation(pod_spec, node) is allowed


def test_a_reserved_node_refuses_other_pods_with_its_own_reason() -> None:
    assert fit.fit_failures({}, {}, RESERVED, {}) == [fit.RESERVATION_MISMATCH]
    assert fit.fit_failures({"nodeSelector": {fit.RESERVATION_LABEL: "r1"}}, {}, PLAIN, {}) == [fit.AFFINITY_MISMATCH]


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
    assert node["metadata"]["labels"][fit.RESERVATION_LABEL] == "l4-reservation"


def test_the_shipped_reserved_scenario() -> None:
    from gang_sim.world.scenario import load_scenario

    scenario = load_scenario("reserved")
    pools = {pool.name: pool for pool in scenario.node_pools}
    assert set(pools) == {"cpu", "l4-reserved", "l4-on-demand", "l4-spot"}
    reserved = pools["l4-reserved"]
    assert (reserved.reservation, reserved.max_nodes, reserved.gpus_per_node) == ("l4-reservation", 2, 4)
    assert pools["l4-spot"].spot and pools["l4-spot"].reservation is None
    assert pools["l4-on-demand"].reservation is None and not pools["l4-on-demand"].spot
