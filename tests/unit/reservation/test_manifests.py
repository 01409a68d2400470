"""Manifests of a gang's objects: the owner ConfigMap owning the rest, the ProvisioningRequest, the Kueue
Job and pod group, the headless Service; the fields upstream controllers read, consistent between objects."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, kueue, owner, pods, provisioning, rank_env, service
from airflow_provider_gang.reservation.spec import MemberResources
from tests.builders import gang_spec, template

UID = "0f1e2d3c-owner"


def _env(container):
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container["env"]}


def test_owner_config_map_records_the_spec_and_owns_nothing():
    spec = gang_spec(labels={"team": "ml"})
    config_map = owner.owner_config_map(spec)
    assert config_map["kind"] == "ConfigMap" and "ownerReferences" not in config_map["metadata"]
    assert config_map["metadata"]["labels"] == {"team": "ml", naming.GANG_LABEL: spec.name, naming.ROLE_LABEL: "owner"}
    assert owner.recorded_spec(config_map) == spec


def test_owner_config_map_names_the_try_that_owns_the_gang():
    spec = gang_spec()
    assert owner.recorded_owner_try(owner.owner_config_map(spec)) is None  # unmarked: made before the marker
    marked = owner.owner_config_map(spec, owner_try=3)
    assert marked["metadata"]["annotations"] == {owner.OWNER_TRY_ANNOTATION: "3"}
    assert owner.recorded_owner_try(marked) == 3
    adopted = {**marked, "metadata": {**marked["metadata"], "annotations": owner.owner_try_annotations(4)}}
    assert owner.recorded_owner_try(adopted) == 4
    garbled = {**marked, "metadata": {**marked["metadata"], "annotations": {owner.OWNER_TRY_ANNOTATION: "two"}}}
    assert owner.recorded_owner_try(garbled) is None


def test_every_other_object_is_owned_by_the_config_map():
    spec = gang_spec(mode="gates")
    objects = [
        provisioning.pod_template(spec, owner_uid=UID),
        provisioning.provisioning_request(spec, owner_uid=UID),
        service.headless_service(spec, owner_uid=UID),
        pods.gated_pod(spec, 0, owner_uid=UID),
        pods.launch_pod(spec, 1, owner_uid=UID),
        kueue.job(gang_spec(mode="kueue"), owner_uid=UID),
        pods.pod_group_pod(gang_spec(mode="kueue"), 0, owner_uid=UID),
    ]
    for obj in objects:
        (reference,) = obj["metadata"]["ownerReferences"]
        assert reference == {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": spec.name,
            "uid": UID,
            "controller": False,
            "blockOwnerDeletion": False,
        }
        assert obj["metadata"]["namespace"] == "ml"
        assert obj["metadata"]["labels"][naming.GANG_LABEL] == spec.name


def test_owner_uid_is_required():
    with pytest.raises(ValueError, match="owner_uid"):
        provisioning.pod_template(gang_spec(), owner_uid="")


def test_provisioning_request_references_the_pod_template():
    spec = gang_spec(
        provisioning_class="queued-provisioning.gke.io", provisioning_parameters={"maxRunDurationSeconds": "3600"}
    )
    template_object = provisioning.pod_template(spec, owner_uid=UID)
    request = provisioning.provisioning_request(spec, owner_uid=UID)
    assert request["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert request["spec"] == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "parameters": {"maxRunDurationSeconds": "3600"},
        "podSets": [{"podTemplateRef": {"name": template_object["metadata"]["name"]}, "count": 4}],
    }
    assert "parameters" not in provisioning.provisioning_request(gang_spec(), owner_uid=UID)["spec"]


def test_provisioning_request_refuses_kueue_mode():
    with pytest.raises(ValueError, match="does not use a ProvisioningRequest"):
        provisioning.provisioning_request(gang_spec(mode="kueue"), owner_uid=UID)


def test_pod_group_pod_carries_kueue_group_metadata():
    spec = gang_spec(mode="kueue", size=3)
    pod = pods.pod_group_pod(spec, 1, owner_uid=UID)
    labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    assert (labels["kueue.x-k8s.io/queue-name"], labels["kueue.x-k8s.io/pod-group-name"]) == ("lq", spec.name)
    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "3"
    assert not any(key.startswith("autoscaling.x-k8s.io/") for key in annotations)


def test_pod_group_members_share_one_kueue_role():
    spec = gang_spec(mode="kueue", size=12)
    hashes = {
        pods.pod_group_pod(spec, rank, owner_uid=UID)["metadata"]["annotations"][pods.KUEUE_ROLE_HASH]
        for rank in range(spec.size)
    }
    assert len(hashes) == 1 and naming.is_dns_label(hashes.pop())
    other = gang_spec(mode="kueue", size=12, resources=MemberResources(gpus=2))
    assert (
        pods.pod_group_pod(other, 0, owner_uid=UID)["metadata"]["annotations"][pods.KUEUE_ROLE_HASH]
        != (pods.pod_group_pod(spec, 0, owner_uid=UID)["metadata"]["annotations"][pods.KUEUE_ROLE_HASH])
    )


def test_pod_group_pod_needs_a_queue():
    with pytest.raises(ValueError, match=r"spec\.queue"):
        pods.pod_group_pod(gang_spec(), 0, owner_uid=UID)


def test_kueue_job():
    spec = gang_spec(mode="kueue", size=8, min_size=4, distributed="torch")
    job = kueue.job(spec, owner_uid=UID)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert job["metadata"]["annotations"] == {
        "kueue.x-k8s.io/job-min-parallelism": "4",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    assert {k: job["spec"][k] for k in ("suspend", "parallelism", "completions", "completionMode", "backoffLimit")} == {
        "suspend": True,
        "parallelism": 8,
        "completions": 8,
        "completionMode": "Indexed",
        "backoffLimit": 0,
    }
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["subdomain"] == spec.name and "hostname" not in pod_spec
    env = _env(pod_spec["containers"][0])
    assert env["RANK"] == {"fieldRef": {"fieldPath": rank_env.COMPLETION_INDEX_FIELD}}
    assert env["MASTER_ADDR"] == f"{spec.name}-0.{spec.name}.ml.svc"
    assert "annotations" not in kueue.job(gang_spec(mode="kueue"), owner_uid=UID)["metadata"]


def test_kueue_job_refuses_other_modes():
    with pytest.raises(ValueError, match="reservation='kueue'"):
        kueue.job(gang_spec(), owner_uid=UID)


def test_headless_service_selects_members():
    spec = gang_spec(master_port=23456)
    svc = service.headless_service(spec, owner_uid=UID)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {naming.GANG_LABEL: spec.name, naming.ROLE_LABEL: "member"}
    assert svc["spec"]["ports"][0]["port"] == 23456
    member_labels = pods.launch_pod(spec, 0, owner_uid=UID)["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= member_labels.items()


def test_selectors():
    spec = gang_spec()
    assert common.gang_selector(spec) == f"{naming.GANG_LABEL}={spec.name}"
    assert common.member_selector(spec) == f"{naming.GANG_LABEL}={spec.name},{naming.ROLE_LABEL}=member"


def test_builders_are_deterministic_and_do_not_alias_the_spec():
    spec = gang_spec(mode="gates", pod_template=template(nodeSelector={"pool": "a"}))
    first = pods.gated_pod(spec, 0, owner_uid=UID)
    first["spec"]["nodeSelector"]["pool"] = "changed"
    first["spec"]["containers"][0]["image"] = "changed"
    assert pods.gated_pod(spec, 0, owner_uid=UID) != first
    assert spec.pod_template["spec"]["nodeSelector"] == {"pool": "a"}
