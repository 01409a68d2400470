"""Checkpoint locations and claims: what the argument accepts (templated ones too), the environment
members get, and where a claim is mounted."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import checkpoint
from airflow_provider_gang.reservation.checkpoint import Checkpoint, PersistentVolumeCheckpoint
from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.manifests import pods as member_pods
from airflow_provider_gang.reservation.spec import GangSpec
from tests.builders import gang_spec, template


@pytest.mark.parametrize("value", ["gs://bucket/dag/run", "/mnt/checkpoints/run-1", "s3://b/k"])
def test_a_uri_or_absolute_path_is_the_location(value: str) -> None:
    assert checkpoint.from_argument(value) == Checkpoint(location=value)


BAD_ARGUMENTS = [
    ("relative-path", "checkpoints/run", "neither a URI"),
    ("empty", "  ", "expected a URI or absolute path"),
    ("not-a-string", 42, "expected a URI or absolute path"),
    ("claim-name", PersistentVolumeCheckpoint(claim="Bad_Name"), "is not a claim name"),
    ("sub-path-escapes", PersistentVolumeCheckpoint(claim="ckpt", sub_path="../other"), "without '..'"),
    ("sub-path-absolute", PersistentVolumeCheckpoint(claim="ckpt", sub_path="/abs"), "relative path"),
    ("mount-root", PersistentVolumeCheckpoint(claim="ckpt", mount_path="/"), "absolute path other than '/'"),
]


@pytest.mark.parametrize(("value", "fragment"), [case[1:] for case in BAD_ARGUMENTS], ids=[c[0] for c in BAD_ARGUMENTS])
def test_a_bad_checkpoint_argument_names_the_fix(value: object, fragment: str) -> None:
    with pytest.raises(GangSpecError, match="checkpoint") as raised:
        checkpoint.from_argument(value)  # type: ignore[arg-type]
    assert fragment in raised.value.message


def _env(spec: GangSpec) -> dict[str, str]:
    container = member_pods.launch_pod(spec, 0, owner_uid="uid")["spec"]["containers"][0]
    return {item["name"]: item.get("value") for item in container["env"]}


def test_members_of_a_first_try_get_the_location_and_try_but_no_resume() -> None:
    spec = gang_spec(checkpoint=Checkpoint("gs://b/run").for_try(1, None))
    env = _env(spec)
    assert (env["GANG_CHECKPOINT_DIR"], env["GANG_TRY_NUMBER"]) == ("gs://b/run", "1")
    assert env["GANG_TERMINATION_MESSAGE_PATH"] == "/dev/termination-log"
    assert "GANG_RESUME" not in env and "GANG_RESUME_STEP" not in env


def test_a_resuming_try_gets_the_step_and_container_zeros_own_message_path() -> None:
    pod_template = template()
    pod_template["spec"]["containers"][0]["terminationMessagePath"] = "/tmp/last-words"
    spec = gang_spec(pod_template=pod_template, checkpoint=Checkpoint("/ckpt").for_try(3, 40))
    env = _env(spec)
    assert (env["GANG_RESUME"], env["GANG_RESUME_STEP"], env["GANG_TRY_NUMBER"]) == ("1", "40", "3")
    assert env["GANG_TERMINATION_MESSAGE_PATH"] == "/tmp/last-words"


def test_without_a_checkpoint_members_get_none_of_it() -> None:
    assert not [name for name in _env(gang_spec()) if "CHECKPOINT" in name or "RESUME" in name]


def test_a_claim_is_mounted_in_every_container_at_its_sub_path() -> None:
    pod_template = template()
    pod_template["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    chosen = checkpoint.from_argument(PersistentVolumeCheckpoint(claim="ckpt", sub_path="dag/run"))
    spec = gang_spec(pod_template=pod_template, checkpoint=chosen.for_try(1, None))
    pod_spec = member_pods.member_template(spec)["spec"]
    assert pod_spec["volumes"] == [{"name": "gang-checkpoint", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    mounts = [container["volumeMounts"] for container in pod_spec["containers"]]
    assert mounts == [[{"name": "gang-checkpoint", "mountPath": "/gang-checkpoint", "subPath": "dag/run"}]] * 2
    assert _env(spec)["GANG_CHECKPOINT_DIR"] == "/gang-checkpoint"


def test_the_spec_round_trips_its_checkpoint_and_old_specs_read_without_one() -> None:
    spec = gang_spec(checkpoint=Checkpoint("/c", claim="ckpt", sub_path="x").for_try(2, 7))
    assert GangSpec.from_dict(spec.to_dict()) == spec
    old = {key: value for key, value in gang_spec().to_dict().items() if key != "checkpoint"}
    assert GangSpec.from_dict(old).checkpoint is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gs://bucket/{{ dag.dag_id }}/{{ run_id }}", "gs://bucket/x/x"),
        ("gs://{{ var.value.bucket }}/run", "gs://x/run"),
        ("/mnt/checkpoints/{{ run_id }}", "/mnt/checkpoints/x"),
        ("{{ var.value.checkpoint_root }}/run", "/parse-check/run"),
        ("{{ var.value.checkpoint }}", "/parse-check"),
        ("/mnt/{% if params.fast %}fast{% else %}slow{% endif %}", "/mnt/xfastxslowx"),
    ],
    ids=["uri", "templated-bucket", "path", "templated-root", "all-templated", "statement"],
)
def test_a_templated_location_stands_in_as_a_valid_one_of_its_kind(value: str, expected: str) -> None:
    stood_in = checkpoint.stand_in(value)
    assert stood_in == expected
    assert checkpoint.from_argument(stood_in) == Checkpoint(location=expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["checkpoints/run", 42, None, "gs://bucket/run"])
def test_a_location_without_jinja_is_checked_as_written(value: object) -> None:
    assert checkpoint.stand_in(value) is value


def test_a_templated_claim_stands_in_for_its_jinja_parts_only() -> None:
    written = PersistentVolumeCheckpoint(
        claim="{{ params.claim }}", sub_path="{{ dag.dag_id }}/{{ run_id }}", mount_path="/ckpt"
    )
    stood_in = checkpoint.stand_in(written)
    assert stood_in == PersistentVolumeCheckpoint(claim="x", sub_path="x/x", mount_path="/ckpt")
    assert written.claim == "{{ params.claim }}"  # the operator's own argument keeps its Jinja to render later
    assert checkpoint.from_argument(stood_in) == Checkpoint(
        "/ckpt",
        claim="x",  # type: ignore[arg-type]
        sub_path="x/x",
    )
    plain = checkpoint.stand_in(PersistentVolumeCheckpoint(claim="ckpt-{{ ds_nodash }}", sub_path="{{ run_id }}"))
    assert plain == PersistentVolumeCheckpoint(claim="ckpt-x", sub_path="x")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (PersistentVolumeCheckpoint(claim="{{ params.claim }}", mount_path="/"), "mount_path"),
        (PersistentVolumeCheckpoint(claim="Bad_Name", sub_path="{{ run_id }}"), "is not a claim name"),
        (PersistentVolumeCheckpoint(claim="{{ params.claim }}", sub_path="/abs"), "relative path"),
        (PersistentVolumeCheckpoint(claim="ckpt", sub_path="../{{ run_id }}"), "sub_path"),
        ("checkpoints/{{ run_id }}", "neither a URI"),
    ],
    ids=["mount-root", "claim", "sub-path", "templated-sub-path-leaving-the-volume", "templated-relative-path"],
)
def test_the_parts_without_jinja_are_still_refused_at_parse_time(value: object, fragment: str) -> None:
    with pytest.raises(GangSpecError, match=fragment):
        checkpoint.from_argument(checkpoint.stand_in(value))  # type: ignore[arg-type]


def test_a_checkpoint_before_its_try_is_planned_gives_only_the_location_and_message_path() -> None:
    assert checkpoint.environment(Checkpoint("/c"), "/dev/termination-log") == [
        {"name": "GANG_CHECKPOINT_DIR", "value": "/c"},
        {"name": "GANG_TERMINATION_MESSAGE_PATH", "value": "/dev/termination-log"},
    ]
    assert [item["name"] for item in checkpoint.environment(Checkpoint("/c", resume_step=4), "/m")] == [
        "GANG_CHECKPOINT_DIR",
        "GANG_TERMINATION_MESSAGE_PATH",
        "GANG_RESUME",
        "GANG_RESUME_STEP",
    ]


def test_a_claim_without_sub_path_is_mounted_at_the_volume_root_once_however_often_it_is_mounted() -> None:
    pod_spec: dict[str, Any] = {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containers": [{"name": "worker", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
    }
    claim = Checkpoint("/gang-checkpoint", claim="ckpt")
    checkpoint.mount(pod_spec, claim)
    checkpoint.mount(pod_spec, claim)
    assert pod_spec["volumes"] == [
        {"name": "data", "emptyDir": {}},
        {"name": "gang-checkpoint", "persistentVolumeClaim": {"claimName": "ckpt"}},
    ]
    assert pod_spec["containers"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "gang-checkpoint", "mountPath": "/gang-checkpoint"},
    ]
    unmounted: dict[str, Any] = {"containers": [{"name": "worker"}]}
    checkpoint.mount(unmounted, Checkpoint("gs://b/run"))
    assert unmounted == {"containers": [{"name": "worker"}]}


def test_init_containers_mount_the_claim_too() -> None:
    pod_spec: dict[str, Any] = {"initContainers": [{"name": "fetch"}], "containers": [{"name": "worker"}]}
    checkpoint.mount(pod_spec, Checkpoint("/gang-checkpoint", claim="ckpt", sub_path="run-1"))
    mount = {"name": "gang-checkpoint", "mountPath": "/gang-checkpoint", "subPath": "run-1"}
    assert [item["volumeMounts"] for item in pod_spec["initContainers"] + pod_spec["containers"]] == [[mount]] * 2
