"""Pods, Jobs, namespaces and services through the typed sync client."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from kubernetes import client

from gang_sim.testing.eventually import eventually
from tests.builders import pod

from .conftest import Cluster, require_garbage_collector, require_version, status_of


@pytest.fixture
def core(cluster: Cluster) -> client.CoreV1Api:
    return client.CoreV1Api(cluster.api)


def test_typed_pod_create_is_pending_with_server_fields(core, namespace):
    created = core.create_namespaced_pod(namespace, pod("p1", labels={"app": "x"}))
    assert created.status.phase == "Pending"
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.namespace == namespace
    assert created.spec.restart_policy == "Always"
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace, label_selector="app=x").items] == ["p1"]
    assert core.list_namespaced_pod(namespace, label_selector="app=other").items == []
    assert [
        p.metadata.name for p in core.list_namespaced_pod(namespace, field_selector="status.phase=Pending").items
    ] == ["p1"]


def test_invalid_pod_name_and_missing_containers_are_422_with_causes(core, namespace):
    body = pod("Not_Valid")
    body["spec"]["containers"] = []
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_pod(namespace, body)
    status = status_of(raised.value)
    assert raised.value.status == 422 and status["reason"] == "Invalid"
    assert {"metadata.name", "spec.containers"} <= {c["field"] for c in status["details"]["causes"]}
    assert core.list_namespaced_pod(namespace).items == []


def test_create_in_a_missing_namespace_is_404(core):
    with pytest.raises(client.ApiException) as raised:
        core.create_namespaced_pod("no-such-namespace", pod("p1"))
    assert raised.value.status == 404


def test_strategic_merge_patch_merges_containers_by_name(core, namespace):
    body = pod("p1")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    core.create_namespaced_pod(namespace, body)
    patched = core.patch_namespaced_pod(
        "p1", namespace, {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("main", "busybox:1.36"), ("side", "busybox:1.37")]


def test_pod_spec_is_immutable_except_images(core, namespace):
    core.create_namespaced_pod(namespace, pod("p1"))
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_pod("p1", namespace, {"spec": {"restartPolicy": "Never"}})
    assert raised.value.status == 422
    assert status_of(raised.value)["details"]["causes"][0]["field"] == "spec"


def test_scheduling_gates_only_at_create_and_then_remove_only(cluster, core, namespace):
    require_version(cluster, 27, "pod scheduling gates")
    body = pod("gated")
    body["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
    body["spec"]["nodeSelector"] = {"pool": "a"}
    created = core.create_namespaced_pod(namespace, body)
    assert any(c.reason == "SchedulingGated" for c in created.status.conditions)
    core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {"zone": "z1"}}})
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_pod("gated", namespace, {"spec": {"nodeSelector": {"pool": "b"}}})
    assert raised.value.status == 422
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_pod(
            "gated",
            namespace,
            {"spec": {"schedulingGates": [{"name": "example.com/gate"}, {"name": "example.com/new"}]}},
            _content_type="application/merge-patch+json",
        )
    assert raised.value.status == 422
    ungated = core.patch_namespaced_pod(
        "gated", namespace, {"spec": {"schedulingGates": None}}, _content_type="application/merge-patch+json"
    )
    assert not ungated.spec.scheduling_gates
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_pod("ungated", namespace, {"spec": {"schedulingGates": [{"name": "late"}]}})
    assert raised.value.status == 404
    with pytest.raises(client.ApiException) as raised:
        core.patch_namespaced_pod(
            "gated",
            namespace,
            {"spec": {"schedulingGates": [{"name": "late"}]}},
            _content_type="application/merge-patch+json",
        )
    assert raised.value.status == 422


def test_delete_pod_returns_the_pod(core, namespace):
    core.create_namespaced_pod(namespace, pod("p1"))
    deleted = core.delete_namespaced_pod("p1", namespace, grace_period_seconds=0)
    assert deleted.metadata.name == "p1"


def test_job_gets_empty_status_and_a_generated_selector(cluster, namespace):
    batch = client.BatchV1Api(cluster.api)
    job = batch.create_namespaced_job(
        namespace,
        {
            "metadata": {"name": "j1"},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                }
            },
        },
    )
    labels = job.spec.selector.match_labels
    # batch.kubernetes.io/-prefixed labels since 1.27; the unprefixed ones on every version
    assert labels.get("batch.kubernetes.io/controller-uid", labels.get("controller-uid")) == job.metadata.uid
    assert job.spec.template.metadata.labels["job-name"] == "j1"
    assert job.spec.backoff_limit == 6 and job.spec.completions == 1 and job.spec.parallelism == 1
    with pytest.raises(client.ApiException) as raised:
        batch.patch_namespaced_job(
            "j1", namespace, {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x:2"}]}}}}
        )
    assert raised.value.status == 422


def test_default_namespaces_exist(core):
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public"} <= names


def test_status_subresource_of_pods_ignores_spec(core, namespace):
    core.create_namespaced_pod(namespace, pod("p1"))
    updated = core.patch_namespaced_pod_status(
        "p1", namespace, {"status": {"phase": "Running"}, "spec": {"restartPolicy": "Never"}}
    )
    assert updated.status.phase == "Running" and updated.spec.restart_policy == "Always"


def is_gone(read: Callable[[], object]) -> bool:
    """Whether ``read`` (a typed client's read of one object) answers 404 Not Found."""
    try:
        read()
    except client.ApiException as error:
        return error.status == 404
    return False


def await_pods_seen_by_the_collector(core: client.CoreV1Api, namespace: str) -> None:
    """Return once the real garbage collector has observed every pod created so far.

    Its graph builder learns of owners and dependents from separate informers, so an Orphan deletion
    it observes before a dependent's creation does not orphan that dependent: it later finds the
    dependent's owner gone and deletes it (the race of item 1 in
    https://github.com/kubernetes/kubernetes/issues/26120). One pod informer feeds the graph in
    order, so a probe pod created last whose owner never existed is collected only after the graph
    holds every earlier pod (``processGraphChanges`` in
    pkg/controller/garbagecollector/graph_builder.go). The emulator collects synchronously inside the
    deleting call and has no such window.
    """
    body = pod("collector-probe")
    absent_owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "absent", "uid": str(uuid.uuid4())}
    body["metadata"]["ownerReferences"] = [absent_owner]
    core.create_namespaced_pod(namespace, body)
    eventually(
        lambda: is_gone(lambda: core.read_namespaced_pod("collector-probe", namespace)),
        timeout=60,
        what="the probe pod with an absent owner collected",
    )


def test_garbage_collection_follows_the_propagation_policy(cluster, core, namespace):
    """Orphan, Background and Foreground deletion of an owner; the real collector acts asynchronously
    (kube-controller-manager's garbage collector, kubernetes.io/docs/concepts/architecture/garbage-collection/),
    so each outcome is awaited."""
    require_garbage_collector(cluster)

    def pod_names() -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items)

    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    for name in ("d1", "d2"):
        body = pod(name)
        body["metadata"]["ownerReferences"] = [reference]
        core.create_namespaced_pod(namespace, body)
    if not cluster.is_emulator:
        await_pods_seen_by_the_collector(core, namespace)
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Orphan")

    def orphaned() -> bool:
        orphans = core.list_namespaced_pod(namespace).items
        names = [p.metadata.name for p in orphans]
        return names == ["d1", "d2"] and not any(p.metadata.owner_references for p in orphans)

    eventually(orphaned, timeout=30, what="d1 and d2 orphaned")
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner2"}})
    body = pod("d3")
    body["metadata"]["ownerReferences"] = [dict(reference, name="owner2", uid=owner.metadata.uid)]
    core.create_namespaced_pod(namespace, body)
    core.delete_namespaced_config_map("owner2", namespace, propagation_policy="Background")
    eventually(lambda: pod_names() == ["d1", "d2"], timeout=30, what="d3 collected after its owner")
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner3"}})
    body = pod("d4")
    body["metadata"]["ownerReferences"] = [
        dict(reference, name="owner3", uid=owner.metadata.uid, blockOwnerDeletion=True)
    ]
    body["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, body)
    core.delete_namespaced_config_map("owner3", namespace, propagation_policy="Foreground")
    assert "foregroundDeletion" in core.read_namespaced_config_map("owner3", namespace).metadata.finalizers
    eventually(
        lambda: core.read_namespaced_pod("d4", namespace).metadata.deletion_timestamp,
        timeout=30,
        what="d4 marked for deletion by the foreground deletion of owner3",
    )
    core.patch_namespaced_pod(
        "d4", namespace, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    eventually(
        lambda: is_gone(lambda: core.read_namespaced_config_map("owner3", namespace)),
        timeout=30,
        what="owner3 deleted once its blocking dependent is gone",
    )
