"""Cloud profiles: what each profile puts into a member's placement, which taints it reads as a reclaim,
where it refuses ``use_reservation``, and how a ``CloudProfile`` is checked and stored."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from airflow_provider_gang.reservation import cloud, members
from airflow_provider_gang.reservation.cloud import CloudProfile
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.manifests import pods
from airflow_provider_gang.reservation.spec import GangSpec
from tests.builders import gang_spec


def _required(template: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = template["spec"].get("affinity") or {}
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [expression for term in terms for expression in term["matchExpressions"]]


# (profile, spot node selector, spot toleration or None, on-demand expression, reclaim taints)
PROFILES = [
    pytest.param(
        "gke",
        {"cloud.google.com/gke-spot": "true"},
        {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
        ("cloud.google.com/impending-node-termination",),
        id="gke",
    ),
    pytest.param(
        "eks",
        {"eks.amazonaws.com/capacityType": "SPOT"},
        None,
        {"key": "eks.amazonaws.com/capacityType", "operator": "NotIn", "values": ["SPOT"]},
        ("aws-node-termination-handler/spot-itn",),
        id="eks",
    ),
    pytest.param(
        "karpenter",
        {"karpenter.sh/capacity-type": "spot"},
        None,
        {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
        ("karpenter.sh/disrupted", "aws-node-termination-handler/spot-itn"),
        id="karpenter",
    ),
    pytest.param(
        "aks",
        {"kubernetes.azure.com/scalesetpriority": "spot"},
        {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot", "effect": "NoSchedule"},
        {"key": "kubernetes.azure.com/scalesetpriority", "operator": "NotIn", "values": ["spot"]},
        (),
        id="aks",
    ),
]


@pytest.mark.parametrize(("name", "selector", "toleration", "on_demand", "taints"), PROFILES)
def test_each_profile_places_spot_and_on_demand_members(
    name: str,
    selector: dict[str, str],
    toleration: dict[str, str] | None,
    on_demand: dict[str, Any],
    taints: tuple[str, ...],
) -> None:
    spot = pods.member_template(gang_spec(cloud=name, spot=True))
    assert spot["spec"]["nodeSelector"] == selector
    assert spot["spec"].get("tolerations", []) == ([toleration] if toleration else [])
    assert spot["metadata"]["labels"][members.SPOT_MEMBER_LABEL] == "true"
    assert "affinity" not in spot["spec"]  # nothing keeps a spot member off spot nodes
    on_demand_template = pods.member_template(gang_spec(cloud=name))
    assert _required(on_demand_template) == [on_demand]
    assert "nodeSelector" not in on_demand_template["spec"]
    assert members.SPOT_MEMBER_LABEL not in on_demand_template["metadata"]["labels"]
    assert cloud.PROFILES[name].preemption_taints == taints


def test_a_spot_toleration_already_in_the_template_is_not_repeated() -> None:
    toleration = cloud.AKS.spot_toleration
    spec = gang_spec(cloud="aks", spot=True)
    spec = dataclasses.replace(spec, pod_template={"spec": {**spec.pod_template["spec"], "tolerations": [toleration]}})
    assert pods.member_template(spec)["spec"]["tolerations"] == [toleration]


def test_a_member_is_on_spot_by_the_providers_label_whatever_the_cloud() -> None:
    for name in cloud.PROFILES:
        pod = {"metadata": pods.member_template(gang_spec(cloud=name, spot=True))["metadata"], "spec": {}}
        assert members.is_on_spot(pod)
    assert not members.is_on_spot({"metadata": {"labels": {}}, "spec": {"nodeSelector": {"pool": "a"}}})
    # A member created by an earlier release carries only GKE's selector.
    assert members.is_on_spot({"spec": {"nodeSelector": {"cloud.google.com/gke-spot": "true"}}})


def test_gke_reservation_selects_its_label() -> None:
    template = pods.member_template(gang_spec(reservation_name="a100-res"))
    assert {"key": "cloud.google.com/reservation-name", "operator": "In", "values": ["a100-res"]} in _required(template)


@pytest.mark.parametrize("name", ["eks", "karpenter", "aks"])
def test_use_reservation_is_refused_where_the_profile_has_no_reservation_label(name: str) -> None:
    with pytest.raises(GangSpecError, match=f"cloud profile {name!r} has no reservation label") as caught:
        gang_spec(cloud=name, reservation_name="a100-res")
    assert caught.value.field == "reservation_name"


def test_a_custom_profile_with_a_reservation_label_places_by_it() -> None:
    profile = CloudProfile(
        name="oci",
        spot_label="example.com/preemptible",
        spot_value="yes",
        spot_taint="example.com/preemptible:NoSchedule",
        reservation_label="example.com/capacity-reservation",
        preemption_taints=["example.com/reclaim"],  # type: ignore[arg-type]  # a list is accepted
    )
    assert profile.preemption_taints == ("example.com/reclaim",)
    assert profile.spot_toleration == {"key": "example.com/preemptible", "operator": "Exists", "effect": "NoSchedule"}
    template = pods.member_template(gang_spec(cloud=profile, reservation_name="block-1"))
    assert _required(template) == [
        {"key": "example.com/preemptible", "operator": "NotIn", "values": ["yes"]},
        {"key": "example.com/capacity-reservation", "operator": "In", "values": ["block-1"]},
    ]


def test_the_profile_is_stored_with_the_spec_and_read_back() -> None:
    profile = CloudProfile(name="mine", spot_label="example.com/spot", spot_value="1", preemption_taints=("a/b",))
    spec = gang_spec(cloud=profile, spot=True)
    assert GangSpec.from_dict(spec.to_dict()) == spec
    assert GangSpec.from_dict(gang_spec(cloud="karpenter").to_dict()).cloud is not None
    stored = spec.to_dict()
    del stored["cloud"]  # a spec stored by an earlier release
    assert GangSpec.from_dict(stored).cloud == cloud.GKE


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        pytest.param({"name": ""}, "name must be a non-empty string", id="no-name"),
        pytest.param({"spot_label": "not a label"}, "spot_label 'not a label' is not a label key", id="spot-label"),
        pytest.param({"reservation_label": "/x"}, "reservation_label '/x' is not a label key", id="reservation"),
        pytest.param({"spot_value": "a b"}, "spot_value 'a b' is not a label value", id="spot-value"),
        pytest.param({"preemption_taints": ("ok/key", "bad key")}, "'bad key' is not a taint key", id="taint"),
        pytest.param({"spot_taint": "key=value"}, "is not 'key=value:Effect'", id="no-effect"),
        pytest.param({"spot_taint": "key=value:Sometimes"}, "is not 'key=value:Effect'", id="unknown-effect"),
        pytest.param({"spot_taint": ":NoSchedule"}, "is not 'key=value:Effect'", id="no-key"),
        pytest.param({"spot_taint": "bad key:NoSchedule"}, "invalid key or value", id="taint-key"),
        pytest.param({"spot_taint": "key=bad value:NoSchedule"}, "invalid key or value", id="taint-value"),
    ],
)
def test_a_malformed_profile_is_refused_naming_cloud(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(GangSpecError, match=problem) as caught:
        CloudProfile(**{"name": "mine", "spot_label": "example.com/spot", "spot_value": "1", **fields})
    assert caught.value.field == "cloud"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("azure", "'azure' is no cloud profile: use one of", id="unknown-name"),
        pytest.param(3, "3 is no cloud profile", id="not-a-name"),
        pytest.param({"name": "x"}, "is not a CloudProfile", id="mapping-missing-fields"),
    ],
)
def test_profile_of_refuses_what_names_no_profile(value: object, problem: str) -> None:
    with pytest.raises(GangSpecError, match=problem):
        cloud.profile_of(value)


def test_profile_of_reads_names_profiles_and_stored_mappings() -> None:
    assert cloud.profile_of("eks") is cloud.EKS
    assert cloud.profile_of(cloud.AKS) is cloud.AKS
    assert cloud.profile_of(cloud.KARPENTER.to_dict()) == cloud.KARPENTER
