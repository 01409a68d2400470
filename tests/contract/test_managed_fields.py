"""``metadata.managedFields`` and server-side apply: who owns which field, conflicts, force, pruning.

Upstream: https://kubernetes.io/docs/reference/using-api/server-side-apply/ (managed fields since
1.18, ``subresource`` in entries since 1.22, apply GA in 1.22).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from kubernetes import client

from tests.builders import config_map, provisioning_request

from .conftest import Cluster, require_version

CONFIGMAPS = "/api/v1/namespaces/{ns}/configmaps"
PRS = "/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests"
APPLY = "application/apply-patch+yaml"
SECOND_PRECISION = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The managedFields entries by (manager, operation); fails on two entries of one manager."""
    found = [(entry["manager"], entry["operation"]) for entry in obj["metadata"].get("managedFields", [])]
    assert len(found) == len(set(found)), found
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def apply(cluster: Cluster, path: str, body: dict[str, Any], manager: str, *, force: bool = False) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return cluster.raw("PATCH", path + query, json.dumps(body).encode(), content_type=APPLY)


def test_create_records_an_update_entry_of_its_manager(cluster: Cluster, namespace):
    body = config_map("owned", {"a": "1"})
    body["metadata"]["labels"] = {"team": "x"}
    status, created = cluster.raw(
        "POST", CONFIGMAPS.format(ns=namespace) + "?fieldManager=creator", json.dumps(body).encode()
    )
    assert status == 201, created
    entry = entries(created)[("creator", "Update")]
    assert entry["apiVersion"] == "v1" and entry["fieldsType"] == "FieldsV1"
    assert SECOND_PRECISION.match(entry["time"]), entry["time"]
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:team": {}}}}
    assert "subresource" not in entry


def test_the_manager_defaults_to_the_user_agent_prefix(cluster: Cluster, namespace):
    created = client.CoreV1Api(cluster.api).create_namespaced_config_map(namespace, config_map("agent", {"a": "1"}))
    managers = [entry.manager for entry in created.metadata.managed_fields]
    assert managers == [cluster.api.user_agent.split("/")[0]]


def test_a_second_manager_takes_the_fields_it_changes_and_its_updates_merge(cluster: Cluster, namespace):
    path = CONFIGMAPS.format(ns=namespace)
    cluster.raw("POST", path + "?fieldManager=creator", json.dumps(config_map("shared", {"a": "1", "b": "1"})).encode())
    for data in ({"a": "2"}, {"c": "3"}):
        status, patched = cluster.raw(
            "PATCH",
            f"{path}/shared?fieldManager=editor",
            json.dumps({"data": data}).encode(),
            content_type="application/merge-patch+json",
        )
        assert status == 200, patched
    owners = entries(patched)
    assert owners[("editor", "Update")]["fieldsV1"] == {"f:data": {"f:a": {}, "f:c": {}}}
    creator_data = owners[("creator", "Update")]["fieldsV1"]["f:data"]
    assert "f:b" in creator_data and "f:a" not in creator_data


def test_a_status_write_is_its_own_entry_with_its_subresource(cluster: Cluster, namespace):
    require_version(cluster, 22, "the subresource of managedFields entries")
    path = PRS.format(ns=namespace)
    status, _ = cluster.raw("POST", path + "?fieldManager=creator", json.dumps(provisioning_request("pr")).encode())
    assert status == 201
    condition = {
        "type": "Provisioned",
        "status": "True",
        "reason": "Done",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status, written = cluster.raw(
        "PATCH",
        f"{path}/pr/status?fieldManager=controller",
        json.dumps({"status": {"conditions": [condition]}}).encode(),
        content_type="application/merge-patch+json",
    )
    assert status == 200, written
    owners = entries(written)
    status_entry = owners[("controller", "Update")]
    assert status_entry["subresource"] == "status"
    assert 'k:{"type":"Provisioned"}' in status_entry["fieldsV1"]["f:status"]["f:conditions"]
    assert "f:spec" in owners[("creator", "Update")]["fieldsV1"]
    assert "f:status" not in owners[("creator", "Update")]["fieldsV1"]


def test_apply_creates_and_owns_exactly_the_applied_fields(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    path = CONFIGMAPS.format(ns=namespace) + "/applied"
    status, created = apply(cluster, path, config_map("applied", {"a": "1"}), "alice")
    assert status == 201, created
    assert entries(created)[("alice", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_an_apply_that_changes_nothing_writes_nothing(cluster: Cluster, namespace):
    require_version(cluster, 27, "managedFields timestamps ignored on no-op writes")
    path = CONFIGMAPS.format(ns=namespace) + "/again"
    status, created = apply(cluster, path, config_map("again", {"a": "1"}), "alice")
    assert status == 201, created
    status, again = apply(cluster, path, config_map("again", {"a": "1"}), "alice")
    assert status == 200 and again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_apply_needs_a_field_manager(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    status, body = cluster.raw(
        "PATCH",
        CONFIGMAPS.format(ns=namespace) + "/nameless",
        json.dumps(config_map("nameless", {"a": "1"})).encode(),
        content_type=APPLY,
    )
    assert status == 422 and body["reason"] == "Invalid" and "fieldManager" in body["message"]


def test_a_conflicting_apply_is_409_with_the_field_and_its_manager_then_force_takes_it(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    path = CONFIGMAPS.format(ns=namespace)
    contested = json.dumps(config_map("contested", {"a": "1", "b": "1"})).encode()
    cluster.raw("POST", path + "?fieldManager=creator", contested)
    status, answer = apply(cluster, f"{path}/contested", config_map("contested", {"a": "2"}), "alice")
    assert status == 409 and answer["reason"] == "Conflict"
    assert answer["message"] == 'Apply failed with 1 conflict: conflict with "creator" using v1: .data.a'
    assert answer["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "creator" using v1', "field": ".data.a"}
    ]
    unchanged = client.CoreV1Api(cluster.api).read_namespaced_config_map("contested", namespace)
    assert unchanged.data == {"a": "1", "b": "1"}

    status, forced = apply(cluster, f"{path}/contested", config_map("contested", {"a": "2"}), "alice", force=True)
    assert status == 200, forced
    assert forced["data"] == {"a": "2", "b": "1"}
    owners = entries(forced)
    assert owners[("alice", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert "f:a" not in owners[("creator", "Update")]["fieldsV1"]["f:data"]


def test_applying_the_value_another_manager_set_shares_it_without_conflict(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    path = CONFIGMAPS.format(ns=namespace)
    cluster.raw("POST", path + "?fieldManager=creator", json.dumps(config_map("agreed", {"a": "1"})).encode())
    status, shared = apply(cluster, f"{path}/agreed", config_map("agreed", {"a": "1"}), "alice")
    assert status == 200, shared
    owners = entries(shared)
    assert "f:a" in owners[("creator", "Update")]["fieldsV1"]["f:data"]
    assert owners[("alice", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_a_field_dropped_from_an_applied_configuration_is_removed_unless_another_manager_owns_it(
    cluster: Cluster, namespace
):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    path = CONFIGMAPS.format(ns=namespace) + "/pruned"
    assert apply(cluster, path, config_map("pruned", {"a": "1", "b": "1", "c": "1"}), "alice")[0] == 201
    assert apply(cluster, path, config_map("pruned", {"c": "1"}), "bob")[0] == 200
    status, pruned = apply(cluster, path, config_map("pruned", {"a": "1"}), "alice")
    assert status == 200, pruned
    assert pruned["data"] == {"a": "1", "c": "1"}  # b was alice's alone; c is bob's too
    assert entries(pruned)[("alice", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_keyed_list_items_are_owned_by_their_merge_key(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")
    path = f"/api/v1/namespaces/{namespace}/pods/keyed"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "keyed"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    status, created = apply(cluster, path, pod, "alice")
    assert status == 201, created
    containers = entries(created)[("alice", "Apply")]["fieldsV1"]["f:spec"]["f:containers"]
    assert containers == {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}}
    pod["spec"]["containers"][0]["image"] = "busybox:1.37"
    status, answer = cluster.raw(
        "PATCH",
        path + "?fieldManager=bob",
        json.dumps(pod).encode(),
        content_type=APPLY,
    )
    assert status == 409
    assert answer["details"]["causes"][0]["field"] == '.spec.containers[name="main"].image'
    assert answer["details"]["causes"][0]["message"] == 'conflict with "alice"'


def test_kubectl_apply_server_side_conflicts_forces_and_hides_managed_fields(cluster: Cluster, namespace):
    require_version(cluster, 18, "server-side apply (beta and on by default since 1.18)")

    def kubectl_apply(manager: str, *extra: str, **data: str) -> Any:
        text = yaml.safe_dump(config_map("kubectl-ssa", data))
        return cluster.kubectl(
            "apply", "--server-side", f"--field-manager={manager}", *extra, "-n", namespace, "-f", "-", input_text=text
        )

    first = kubectl_apply("alice", a="1", b="1")
    assert first.returncode == 0 and "configmap/kubectl-ssa serverside-applied" in first.stdout, first.stderr
    conflicting = kubectl_apply("bob", a="2")
    assert conflicting.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "alice": .data.a' in conflicting.stderr
    assert "--force-conflicts" in conflicting.stderr
    forced = kubectl_apply("bob", "--force-conflicts", a="2")
    assert forced.returncode == 0, forced.stderr
    dropped = kubectl_apply("alice", b="1")  # a is bob's now: it stays; alice only keeps b
    assert dropped.returncode == 0, dropped.stderr

    shown = cluster.kubectl("get", "configmap", "kubectl-ssa", "-n", namespace, "-o", "yaml")
    assert shown.returncode == 0 and "managedFields" not in shown.stdout
    full = cluster.kubectl("get", "configmap", "kubectl-ssa", "-n", namespace, "-o", "yaml", "--show-managed-fields")
    stored = yaml.safe_load(full.stdout)
    assert stored["data"] == {"a": "2", "b": "1"}
    owners = entries(stored)
    assert owners[("alice", "Apply")]["fieldsV1"] == {"f:data": {"f:b": {}}}
    assert owners[("bob", "Apply")]["fieldsV1"] == {"f:data": {"f:a": {}}}
