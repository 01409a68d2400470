"""Members are never told a size other than the number that runs: under Kueue partial admission the
size variables read the world ConfigMap (``manifests.world``); otherwise they stay plain values."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import members, naming
from airflow_provider_gang.reservation.manifests import kueue, pods, rank_env, world
from tests.builders import gang_spec

UID = "0f1e2d3c-owner"
WORLD_REFERENCE = {"configMapKeyRef": {"name": "gang-t1-abc-world", "key": "size"}}


def _env(entries):
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in entries}


def _job_env(spec):
    return _env(kueue.job(spec, owner_uid=UID)["spec"]["template"]["spec"]["containers"][0]["env"])


@pytest.mark.parametrize(
    ("distributed", "expected"),
    [
        (None, {"GANG_SIZE"}),
        ("torch", {"GANG_SIZE", "WORLD_SIZE", "PET_NNODES"}),
        ("jax", {"GANG_SIZE", "JAX_NUM_PROCESSES"}),
    ],
    ids=["plain", "torch", "jax"],
)
def test_partially_admitted_job_reads_every_size_from_the_world_config_map(distributed, expected):
    env = _job_env(gang_spec(mode="kueue", size=4, min_size=2, distributed=distributed))
    from_world = {name for name, value in env.items() if value == WORLD_REFERENCE}
    assert from_world == expected == set(env) & rank_env.SIZE_VARIABLES
    assert env["GANG_ORIGINAL_SIZE"] == "4"  # the requested size, for gradient accumulation
    assert not any("configMapKeyRef" in str(value) for name, value in env.items() if name not in expected)


@pytest.mark.parametrize(
    "overrides",
    [
        {"mode": "kueue", "size": 4},
        {"mode": "kueue", "size": 4, "min_size": 4},
        {"size": 4, "min_size": 2},  # provisioning_request: min_size is only the ShrinkTo floor
    ],
    ids=["kueue-no-min", "kueue-min-equals-size", "provisioning-request"],
)
def test_a_gang_whose_size_is_known_at_creation_gets_plain_values(overrides):
    spec = gang_spec(distributed="torch", **overrides)
    assert not world.uses_world_config_map(spec)
    env = _env(rank_env.rank_environment(spec, 1))
    assert (env["GANG_SIZE"], env["WORLD_SIZE"], env["PET_NNODES"]) == ("4", "4", "4")


def test_pod_group_members_of_a_partial_gang_read_the_world_config_map_too():
    spec = gang_spec(mode="kueue", size=4, min_size=2, distributed="torch")
    env = _env(pods.pod_group_pod(spec, 1, owner_uid=UID)["spec"]["containers"][0]["env"])
    assert env["WORLD_SIZE"] == WORLD_REFERENCE and env["RANK"] == "1"


def test_world_config_map_tells_the_admitted_size_and_belongs_to_the_gang():
    spec = gang_spec(mode="kueue", size=4, min_size=2, labels={"team": "ml"})
    config_map = world.world_config_map(spec, size=2, owner_uid=UID)
    assert config_map["metadata"]["name"] == world.world_config_map_name(spec) == "gang-t1-abc-world"
    assert config_map["metadata"]["namespace"] == "ml"
    assert config_map["metadata"]["labels"] == {
        "team": "ml",
        naming.GANG_LABEL: spec.name,
        naming.ROLE_LABEL: "rendezvous",
    }
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == UID
    assert config_map["data"] == {world.SIZE_KEY: "2"}
    assert world.recorded_size(config_map) == 2
    assert naming.is_dns_subdomain(config_map["metadata"]["name"])


@pytest.mark.parametrize(
    ("spec_overrides", "size", "match"),
    [
        ({"mode": "kueue", "size": 4}, 4, "min_size < size"),
        ({"size": 4, "min_size": 2}, 2, "min_size < size"),
        ({"mode": "kueue", "size": 4, "min_size": 2}, 1, "outside min_size..size"),
        ({"mode": "kueue", "size": 4, "min_size": 2}, 5, "outside min_size..size"),
    ],
    ids=["no-partial-admission", "not-kueue", "below-min", "above-size"],
)
def test_world_config_map_refuses_what_cannot_happen(spec_overrides, size, match):
    with pytest.raises(ValueError, match=match):
        world.world_config_map(gang_spec(**spec_overrides), size=size, owner_uid=UID)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        ({}, None),
        ({"size": "three"}, None),
        ({"size": ["3"]}, None),
        ({"size": "3"}, 3),
    ],
    ids=["no-data", "no-key", "not-a-number", "wrong-type", "number"],
)
def test_recorded_size(data, expected):
    config_map = {"metadata": {"name": "x"}} if data is None else {"metadata": {"name": "x"}, "data": data}
    assert world.recorded_size(config_map) == expected


def _waiting(reason):
    return {
        "metadata": {"name": "gang-0", "labels": {naming.RANK_LABEL: "0"}},
        "status": {
            "phase": "Pending",
            "containerStatuses": [{"name": "trainer", "state": {"waiting": {"reason": reason, "message": "m"}}}],
        },
    }


def test_create_container_config_error_is_pending_not_fatal():
    """The kubelet retries it; partially admitted members wait in it for their world ConfigMap."""
    waiting = members.member_status(_waiting("CreateContainerConfigError"), 0)
    assert waiting.state is members.MemberState.PENDING
    assert (
        members.classify_running_gang([_waiting("CreateContainerConfigError")], size=1).state
        is members.GangState.STARTING
    )
    assert members.member_status(_waiting("CreateContainerError"), 0).state is members.MemberState.FAILED
