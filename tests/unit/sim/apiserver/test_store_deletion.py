"""The store's deletion as upstream: finalizers, garbage collection of dependents (background, orphan,
foreground), namespaces, and pods removed at once or after the kubelet's graceful stop."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.store import Store
from tests.builders import config_map, pod

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


def reference(owner: dict, **extra) -> dict:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        **extra,
    }


def test_finalizers_delay_removal_and_none_may_be_added_while_deleting(store):
    store.create(CM, config_map("a", finalizers=["example.com/x"]))
    terminating = store.delete(CM, "a")
    assert terminating["metadata"]["deletionTimestamp"]
    with pytest.raises(errors.ApiError) as raised:
        store.patch(CM, "a", {"metadata": {"finalizers": ["example.com/x", "example.com/y"]}})
    assert raised.value.code == 422
    assert store.delete(CM, "a")["metadata"]["deletionTimestamp"] == terminating["metadata"]["deletionTimestamp"]
    store.patch(CM, "a", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.ApiError):
        store.get(CM, "a")


def test_clearing_the_last_finalizer_deletes_the_stored_state_as_upstream(store):
    events = []
    store.subscribe(lambda kind, resource, obj: events.append((kind, obj["metadata"].get("finalizers"))))
    store.create(CM, config_map("a", finalizers=["example.com/x"]))
    store.delete(CM, "a")
    answer = store.patch(CM, "a", {"metadata": {"finalizers": None}})
    assert answer["metadata"]["finalizers"] == ["example.com/x"]
    assert events == [("ADDED", ["example.com/x"]), ("MODIFIED", ["example.com/x"]), ("DELETED", ["example.com/x"])]


def test_background_collection_is_recursive_and_spares_dependents_with_another_live_owner(store):
    root = store.create(CM, config_map("root"))
    other = store.create(CM, config_map("other"))
    child = store.create(CM, config_map("child", ownerReferences=[reference(root)]))
    store.create(PODS, pod("grandchild", ownerReferences=[reference(child)]))
    shared = store.create(PODS, pod("shared", ownerReferences=[reference(root), reference(other)]))
    store.delete(CM, "root")
    assert [o["metadata"]["name"] for o in store.list(CM)[0] if o["metadata"]["namespace"] == "default"] == ["other"]
    remaining = store.list(PODS)[0]
    assert [p["metadata"]["name"] for p in remaining] == ["shared"]
    assert remaining[0]["metadata"]["ownerReferences"] == [reference(other)]
    assert shared["metadata"]["uid"] == remaining[0]["metadata"]["uid"]


def test_orphan_and_foreground_deletes_are_marked_first_as_upstream(store):
    events = []
    store.subscribe(
        lambda kind, resource, obj: events.append((kind, obj["metadata"]["name"], obj["metadata"].get("finalizers")))
    )
    owner = store.create(CM, config_map("owner"))
    store.create(PODS, pod("dependent", ownerReferences=[reference(owner)]))
    answer = store.delete(CM, "owner", propagation_policy="Orphan")
    assert answer["metadata"]["finalizers"] == ["orphan"] and answer["metadata"]["deletionTimestamp"]
    assert events[2:] == [
        ("MODIFIED", "owner", ["orphan"]),
        ("MODIFIED", "dependent", None),
        ("DELETED", "owner", ["orphan"]),
    ]


def test_jobs_orphan_their_pods_by_default_as_upstream(store):
    job = store.create(
        "batch/v1/jobs",
        {
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                }
            },
        },
    )
    store.create(PODS, pod("worker", ownerReferences=[reference(job)]))
    store.delete("batch/v1/jobs", "j")
    assert "ownerReferences" not in store.get(PODS, "worker")["metadata"]


def test_deleting_a_namespace_deletes_its_objects(store):
    store.create("v1/namespaces", {"metadata": {"name": "team"}})
    store.create(CM, config_map("a"), "team")
    store.create(CM, config_map("b"), "default")
    store.delete("v1/namespaces", "team")
    assert [c["metadata"]["namespace"] for c in store.list(CM)[0]] == ["default"]
    with pytest.raises(errors.ApiError) as raised:
        store.create(CM, config_map("c"), "team")
    assert raised.value.code == 404


def test_pods_are_removed_at_once_with_a_deletion_stamp_on_their_last_state(store):
    store.create(PODS, pod("p"))
    deleted = store.delete(PODS, "p")
    assert deleted["metadata"]["deletionTimestamp"] and deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    assert store.list(PODS)[0] == []


def test_graceful_pod_deletion_waits_for_the_kubelet():
    store = Store(wall_clock=lambda: 1_800_000_000.0)
    store.create(PODS, pod("unbound"))
    store.delete(PODS, "unbound")
    bound = pod("bound")
    bound["spec"]["nodeName"] = "node-1"
    store.create(PODS, bound)
    terminating = store.delete(PODS, "bound")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    assert terminating["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:30Z"
    assert store.get(PODS, "bound")["metadata"]["deletionTimestamp"]
    store.delete(PODS, "bound", grace_period_seconds=0)
    assert store.list(PODS)[0] == []
