"""A gang with a topology, purely: the spec's checks, the loosening step, and the manifests of every
mode - Kueue's TAS annotations, the PodGroup's topology constraint, members pinned to a domain and to
a host as they are released or created."""

from __future__ import annotations

import dataclasses
import json

import pytest

from airflow_provider_gang.reservation import fallback, manifests
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.fallback import LoosenTopology, RetryAsIs
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from airflow_provider_gang.reservation.topology.labels import BLOCK, HOSTNAME, SUBBLOCK
from airflow_provider_gang.reservation.topology.pins import Placement
from tests.builders import gang_spec

PINNED = Placement(SUBBLOCK, ("rack-b1",), note="rack-b1 holds the 4 members")


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"required_topology": SUBBLOCK, "preferred_topology": BLOCK}, "preferred_topology", "conflicts with"),
        ({"required_topology": "not a label"}, "required_topology", "is not a node label key"),
        ({"mode": "workload", "preferred_topology": SUBBLOCK}, "preferred_topology", "honours only a required"),
        ({"mode": "kueue", "required_topology": SUBBLOCK, "placement": PINNED}, "placement", "only gates and"),
        (
            {"required_topology": BLOCK, "placement": PINNED},
            "placement",
            "pins 'cloud.google.com/gce-topology-subblock'",
        ),
        ({"placement": PINNED}, "placement", "the gang's topology is None"),
    ],
)
def test_what_a_topology_cannot_be(fields: dict[str, object], field: str, said: str) -> None:
    with pytest.raises(GangSpecError) as refused:
        gang_spec(**fields)
    assert refused.value.field == field and said in refused.value.message


def test_the_spec_round_trips_with_its_placement() -> None:
    spec = gang_spec(required_topology=SUBBLOCK, placement=PINNED)
    assert type(spec).from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec.topology_label == SUBBLOCK


LOOSENING = [
    ("rack-to-block", LoosenTopology(BLOCK), {"required_topology": BLOCK, "preferred_topology": None}),
    (
        "rack-to-prefer-block",
        LoosenTopology(BLOCK, preferred=True),
        {"required_topology": None, "preferred_topology": BLOCK},
    ),
    (
        "rack-to-prefer-rack",
        LoosenTopology(preferred=True),
        {"required_topology": None, "preferred_topology": SUBBLOCK},
    ),
    ("drop", LoosenTopology(), {"required_topology": None, "preferred_topology": None}),
]


@pytest.mark.parametrize(("step", "after"), [case[1:] for case in LOOSENING], ids=[case[0] for case in LOOSENING])
def test_a_loosening_step_widens_or_drops_the_topology(step: LoosenTopology, after: dict[str, object]) -> None:
    loosened = step.apply(gang_spec(required_topology=SUBBLOCK))
    assert {key: getattr(loosened, key) for key in after} == after


def test_rack_then_block_then_none_composes_with_other_steps() -> None:
    ladder = (LoosenTopology(BLOCK), RetryAsIs(), LoosenTopology())
    base = gang_spec(required_topology=SUBBLOCK, size=8)
    fallback.check_ladder(ladder, base)
    assert fallback.spec_for_steps(base, ladder, [None, 0]).required_topology == BLOCK
    last = fallback.spec_for_steps(base, ladder, [None, 0, 1, 2])
    assert (last.required_topology, last.preferred_topology, last.size) == (None, None, 8)
    assert [step.describe() for step in ladder] == [
        f"loosen the topology to require {BLOCK}",
        "retry as-is",
        "drop the topology",
    ]


def test_the_default_reasons_are_a_gang_no_domain_holds_not_a_lost_race() -> None:
    reasons = LoosenTopology().reasons
    assert {Reason.DEADLINE, Reason.CAPACITY_NOT_FOUND, Reason.KUEUE_RETRY, Reason.NO_TOPOLOGY_DOMAIN} <= reasons
    assert Reason.TOPOLOGY_DOMAIN_FULL not in reasons


def test_loosening_a_gang_without_a_topology_is_refused() -> None:
    with pytest.raises(GangSpecError, match="no topology to loosen"):
        fallback.check_ladder((LoosenTopology(BLOCK),), gang_spec())


@pytest.mark.parametrize(
    ("topology", "annotation"),
    [
        ({"required_topology": SUBBLOCK}, {"kueue.x-k8s.io/podset-required-topology": SUBBLOCK}),
        ({"preferred_topology": BLOCK}, {"kueue.x-k8s.io/podset-preferred-topology": BLOCK}),
        ({}, None),
    ],
)
def test_kueue_asks_topology_aware_scheduling_on_the_jobs_pod_template(
    topology: dict[str, str], annotation: dict[str, str] | None
) -> None:
    job = manifests.kueue.job(gang_spec(mode="kueue", **topology), owner_uid="u")
    assert job["spec"]["template"]["metadata"].get("annotations") == annotation


def test_the_pod_group_carries_the_topology_constraint() -> None:
    group = manifests.pod_group.pod_group(gang_spec(mode="workload", required_topology=SUBBLOCK), owner_uid="u")
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": SUBBLOCK}]}
    plain = manifests.pod_group.pod_group(gang_spec(mode="workload"), owner_uid="u")
    assert "schedulingConstraints" not in plain["spec"]


def test_the_template_and_every_member_are_pinned_to_the_domain() -> None:
    spec = gang_spec(
        mode="gates",
        required_topology=SUBBLOCK,
        placement=PINNED,
        provisioning_class="check-capacity.autoscaling.x-k8s.io",
    )
    template = manifests.provisioning.pod_template(spec, owner_uid="u")["template"]
    assert template["spec"]["nodeSelector"][SUBBLOCK] == "rack-b1"
    gated = manifests.pods.gated_pod(spec, 2, owner_uid="u")
    assert gated["spec"]["nodeSelector"][SUBBLOCK] == "rack-b1"
    launched = manifests.pods.launch_pod(spec, 2, owner_uid="u", host="rack-b1-h1")
    assert launched["spec"]["nodeSelector"] == {SUBBLOCK: "rack-b1", HOSTNAME: "rack-b1-h1"}


def test_several_domains_are_one_required_in() -> None:
    spread = dataclasses.replace(PINNED, domains=("rack-b1", "rack-a2"))
    spec = gang_spec(preferred_topology=SUBBLOCK, placement=spread)
    pod = manifests.pods.launch_pod(spec, 0, owner_uid="u")
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert all(
        {"key": SUBBLOCK, "operator": "In", "values": ["rack-b1", "rack-a2"]} in term["matchExpressions"]
        for term in terms
    )
    assert SUBBLOCK not in (pod["spec"].get("nodeSelector") or {})


def test_the_release_pins_the_host_in_the_same_patch() -> None:
    spec = gang_spec(mode="gates", required_topology=SUBBLOCK, placement=PINNED)
    pod = manifests.pods.gated_pod(spec, 0, owner_uid="u")
    gate = pod["spec"]["schedulingGates"][-1]["name"]
    patch = manifests.pods.release_gate_patch(pod, gate, host="rack-b1-h1")
    assert patch[-1] == {"op": "add", "path": "/spec/nodeSelector/kubernetes.io~1hostname", "value": "rack-b1-h1"}
    bare = {"spec": {"schedulingGates": [{"name": gate}]}}
    assert manifests.pods.release_gate_patch(bare, gate, host="h")[-1] == {
        "op": "add",
        "path": "/spec/nodeSelector",
        "value": {HOSTNAME: "h"},
    }
    assert manifests.pods.release_gate_patch({"spec": {}}, gate, host="h") == []


def test_the_world_config_map_tells_the_ranks_domains() -> None:
    spec = gang_spec(mode=ReservationMode.GATES, required_topology=SUBBLOCK, placement=PINNED)
    world = manifests.world.world_config_map(spec, size=4, owner_uid="u", domains={1: "rack-b1", 0: "rack-b1"})
    assert world["data"] == {"topology": SUBBLOCK, "domains": '{"0": "rack-b1", "1": "rack-b1"}'}
    with pytest.raises(ValueError, match="needs partial admission"):
        manifests.world.world_config_map(gang_spec(mode=ReservationMode.GATES), size=4, owner_uid="u", domains={})
