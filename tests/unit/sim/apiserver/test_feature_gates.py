"""Feature gates of the emulated apiserver: ``TopologyAwareWorkloadScheduling`` and the PodGroup's
(and scheduling Workload's) ``schedulingConstraints``, dropped while the gate is off as the v1.37
registry strategies do, checked while it is on."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.feature_gates import TOPOLOGY_AWARE_WORKLOAD_SCHEDULING, UnknownFeatureGate
from gang_sim.apiserver.server import Emulator

POD_GROUPS = "scheduling.k8s.io/v1beta1/podgroups"
WORKLOADS = "scheduling.k8s.io/v1beta1/workloads"
RACK = {"topology": [{"key": "cloud.google.com/gce-topology-subblock"}]}


def pod_group(constraints: dict[str, Any] | None = RACK) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": 2}}}
    if constraints is not None:
        spec["schedulingConstraints"] = constraints
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}


def workload(constraints: dict[str, Any]) -> dict[str, Any]:
    template = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": constraints}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podGroupTemplates": [template]},
    }


def emulator(gate: bool) -> Emulator:
    return Emulator(feature_gates=(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING,) if gate else ())


def test_gate_off_drops_the_constraint_on_create_without_an_error() -> None:
    created = emulator(gate=False).store.create(POD_GROUPS, pod_group(), "default")
    assert "schedulingConstraints" not in created["spec"]
    assert created["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


def test_a_dry_run_tells_a_client_the_gate_is_off_before_anything_is_created() -> None:
    store = emulator(gate=False).store
    assert "schedulingConstraints" not in store.create(POD_GROUPS, pod_group(), "default", dry_run=True)["spec"]
    assert store.list(POD_GROUPS, "default")[0] == []
    assert (
        emulator(gate=True).store.create(POD_GROUPS, pod_group(), "default", dry_run=True)["spec"][
            "schedulingConstraints"
        ]
        == RACK
    )


def test_gate_off_drops_the_constraint_added_by_an_update() -> None:
    store = emulator(gate=False).store
    store.create(POD_GROUPS, pod_group(constraints=None), "default")
    patched = store.patch(POD_GROUPS, "g", {"spec": {"schedulingConstraints": RACK}}, namespace="default")
    assert "schedulingConstraints" not in patched["spec"]


def test_gate_off_drops_a_workload_templates_constraint() -> None:
    created = emulator(gate=False).store.create(WORKLOADS, workload(RACK), "default")
    assert "schedulingConstraints" not in created["spec"]["podGroupTemplates"][0]


def test_gate_on_keeps_the_constraint_and_makes_it_immutable() -> None:
    store = emulator(gate=True).store
    assert store.create(POD_GROUPS, pod_group(), "default")["spec"]["schedulingConstraints"] == RACK
    assert (
        store.create(WORKLOADS, workload(RACK), "default")["spec"]["podGroupTemplates"][0]["schedulingConstraints"]
        == RACK
    )
    with pytest.raises(ApiError) as raised:
        store.patch(
            POD_GROUPS, "g", {"spec": {"schedulingConstraints": {"topology": [{"key": "b"}]}}}, namespace="default"
        )
    assert raised.value.code == 422
    assert "spec.schedulingConstraints: Invalid value" in str(raised.value) and "field is immutable" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("constraints", "message"),
    [
        pytest.param(
            {"topology": [{"key": "a"}, {"key": "b"}]},
            "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 items",
            id="two-constraints",
        ),
        pytest.param({"topology": [{}]}, "spec.schedulingConstraints.topology[0].key: Required value", id="no-key"),
        pytest.param(
            {"topology": [{"key": "rack/"}]},
            "spec.schedulingConstraints.topology[0].key: Invalid value",
            id="key-not-a-label-key",
        ),
    ],
)
def test_gate_on_refuses_a_malformed_constraint(constraints: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as raised:
        emulator(gate=True).store.create(POD_GROUPS, pod_group(constraints), "default")
    assert raised.value.code == 422
    assert message in str(raised.value)


def test_an_unknown_gate_is_refused_naming_the_modelled_ones() -> None:
    with pytest.raises(UnknownFeatureGate, match=TOPOLOGY_AWARE_WORKLOAD_SCHEDULING):
        Emulator(feature_gates=("GangScheduling",))


def test_a_gate_leaves_a_cluster_without_the_workload_api_without_it() -> None:
    server = Emulator(serve_workload_api=False, feature_gates=(TOPOLOGY_AWARE_WORKLOAD_SCHEDULING,))
    assert server.store.registry.lookup("scheduling.k8s.io/v1beta1", "podgroups") is None
