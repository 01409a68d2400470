"""The deletion planner alone: given stored objects, the plan (nothing is written while planning).

A :class:`Store` serves as the planner's read-only view; each test checks that planning and
resolving steps leave its resourceVersion where it was. Semantics as
https://kubernetes.io/docs/concepts/architecture/garbage-collection/ describes them.
"""

from __future__ import annotations

import pytest

from gang_sim.apiserver import garbage
from gang_sim.apiserver.store import Store

CM = "v1/configmaps"
PODS = "v1/pods"
NOW = "2027-01-15T08:00:00Z"


@pytest.fixture
def store() -> Store:
    return Store(seed=1, wall_clock=lambda: 1_800_000_000.0)


def configmap(name: str, **metadata: object) -> dict:
    return {"metadata": {"name": name, **metadata}, "data": {"k": "v"}}


def pod(name: str, node_name: str | None = None, **metadata: object) -> dict:
    spec: dict = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, **metadata}, "spec": spec}


def reference(owner: dict) -> dict:
    metadata = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": metadata["name"], "uid": metadata["uid"]}


def stored(store: Store, resource: str, name: str, namespace: str = "default") -> dict:
    resource_type = store.resolve(resource)
    found = store.stored((resource_type.storage_key, namespace if resource_type.namespaced else "", name))
    assert found is not None
    return found


def plan(store: Store, resource: str, name: str, policy: str, grace: int | None = None) -> garbage.DeletionPlan:
    version = store.resource_version
    made = garbage.plan_delete(store, store.resolve(resource), stored(store, resource, name), policy, grace)
    assert store.resource_version == version, "planning wrote to the store"
    return made


def resolve(store: Store, step: garbage.Step) -> tuple[garbage.Step, ...]:
    assert not isinstance(step, (garbage.Commit, garbage.Remove)), "a write has nothing to resolve"
    version = store.resource_version
    steps = step.resolve(store)
    assert store.resource_version == version, "resolving wrote to the store"
    return steps


def test_an_object_without_finalizers_is_removed_as_stored_and_background_plans_nothing_more(store):
    store.create(CM, configmap("a"))
    current = stored(store, CM, "a")
    made = plan(store, CM, "a", "Background")
    assert made == garbage.DeletionPlan((), garbage.Remove(store.resolve(CM), current, current), (), current)
    assert made.steps == (made.own,)


def test_orphan_and_foreground_mark_with_their_finalizer_after_the_objects_own(store):
    uid = store.create(CM, configmap("owner", finalizers=["example.com/x"]))["metadata"]["uid"]
    owner = ("/configmaps", "default", "owner")
    orphan = plan(store, CM, "owner", "Orphan")
    assert orphan.before == ()
    assert orphan.own == garbage.MarkDeleting(owner, ("example.com/x", "orphan"))
    assert orphan.after == (garbage.OrphanDependents(uid), garbage.ReleaseFinalizer(owner, "orphan"))
    foreground = plan(store, CM, "owner", "Foreground")
    assert foreground.own == garbage.MarkDeleting(owner, ("example.com/x", "foregroundDeletion"))
    assert foreground.after == (garbage.DeleteDependentsInForeground(uid), garbage.FinishForeground(uid))
    store.patch(CM, "owner", {"metadata": {"finalizers": ["orphan"]}})
    assert plan(store, CM, "owner", "Orphan").own == garbage.MarkDeleting(owner, ("orphan",))  # not twice


def test_background_with_finalizers_only_marks(store):
    store.create(CM, configmap("held", finalizers=["example.com/x"]))
    made = plan(store, CM, "held", "Background")
    assert made.own == garbage.MarkDeleting(("/configmaps", "default", "held"), ("example.com/x",))
    assert made.after == ()
    (commit,) = resolve(store, made.own)
    assert isinstance(commit, garbage.Commit)
    assert commit.old is stored(store, CM, "held")
    assert commit.new["metadata"]["deletionTimestamp"] == NOW
    assert commit.new["metadata"]["deletionGracePeriodSeconds"] == 0
    assert commit.new["metadata"]["finalizers"] == ["example.com/x"]
    assert "deletionTimestamp" not in commit.old["metadata"]


def test_deleting_an_object_already_being_deleted_changes_nothing(store):
    store.create(CM, configmap("held", finalizers=["example.com/x"]))
    store.delete(CM, "held")
    current = stored(store, CM, "held")
    assert plan(store, CM, "held", "Foreground") == garbage.DeletionPlan((), None, (), current)


def test_a_pod_is_removed_with_a_deletion_stamp_on_its_last_state(store):
    store.create(PODS, pod("p"))
    current = stored(store, PODS, "p")
    own = plan(store, PODS, "p", "Background").own
    assert isinstance(own, garbage.Remove) and own.old is current
    assert own.last["metadata"]["deletionTimestamp"] == NOW
    assert own.last["metadata"]["deletionGracePeriodSeconds"] == 0
    assert "deletionTimestamp" not in current["metadata"]


def test_a_bound_pod_is_marked_until_a_delete_with_grace_zero():
    store = Store(wall_clock=lambda: 1_800_000_000.0)
    store.create(PODS, pod("unbound"))
    store.create(PODS, pod("bound", node_name="node-1"))
    store.create(PODS, pod("finished", node_name="node-1"))
    store.patch(PODS, "finished", {"status": {"phase": "Succeeded"}}, subresource="status")
    assert isinstance(plan(store, PODS, "unbound", "Background").own, garbage.Remove)
    assert isinstance(plan(store, PODS, "finished", "Background").own, garbage.Remove)
    own = plan(store, PODS, "bound", "Background", grace=7).own
    assert isinstance(own, garbage.Commit)
    assert own.new["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:07Z"
    assert own.new["metadata"]["deletionGracePeriodSeconds"] == 7
    assert own.new["metadata"]["generation"] == own.old["metadata"]["generation"] + 1
    negative = plan(store, PODS, "bound", "Background", grace=-5).own
    assert isinstance(negative, garbage.Commit) and negative.new["metadata"]["deletionGracePeriodSeconds"] == 1
    assert isinstance(plan(store, PODS, "bound", "Background", grace=0).own, garbage.Remove)
    store.delete(PODS, "bound")
    assert plan(store, PODS, "bound", "Background").own is None  # terminating: waits for its kubelet
    kubelet = plan(store, PODS, "bound", "Background", grace=0).own
    assert isinstance(kubelet, garbage.Remove)
    assert kubelet.last["metadata"]["deletionGracePeriodSeconds"] == 0


def test_a_second_delete_may_only_shorten_a_pods_grace_period():
    now = [1_800_000_000.0]
    store = Store(wall_clock=lambda: now[0])
    store.create(PODS, pod("bound", node_name="node-1"))
    store.delete(PODS, "bound", grace_period_seconds=30)  # until 08:00:30
    assert plan(store, PODS, "bound", "Background", grace=30).own is None
    assert plan(store, PODS, "bound", "Background").own is None
    now[0] += 10
    shorter = plan(store, PODS, "bound", "Background", grace=15).own
    assert isinstance(shorter, garbage.Commit)  # moved back from the first request's end, not from now
    assert shorter.new["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:15Z"
    assert shorter.new["metadata"]["deletionGracePeriodSeconds"] == 15
    past = plan(store, PODS, "bound", "Background", grace=5).own  # 08:00:05 has passed: now, and 1 s
    assert isinstance(past, garbage.Commit)
    assert past.new["metadata"]["deletionTimestamp"] == "2027-01-15T08:00:10Z"
    assert past.new["metadata"]["deletionGracePeriodSeconds"] == 1
    assert isinstance(plan(store, PODS, "bound", "Background", grace=0).own, garbage.Remove)


def test_a_graceful_mark_carries_the_policys_finalizer_and_releasing_it_does_not_end_the_grace_period():
    store = Store(wall_clock=lambda: 1_800_000_000.0)
    store.create(PODS, pod("bound", node_name="node-1"))
    made = plan(store, PODS, "bound", "Orphan")
    assert isinstance(made.own, garbage.Commit)
    assert made.own.new["metadata"]["finalizers"] == ["orphan"]
    assert made.own.new["metadata"]["deletionGracePeriodSeconds"] == 30
    store.delete(PODS, "bound", propagation_policy="Orphan")  # the orphan finalizer is released at once
    marked = store.get(PODS, "bound")
    assert "finalizers" not in marked["metadata"] and marked["metadata"]["deletionGracePeriodSeconds"] == 30
    store.create(PODS, pod("held", node_name="node-1", finalizers=["example.com/hold"]))
    store.delete(PODS, "held")
    store.delete(PODS, "held", grace_period_seconds=0)  # the kubelet's: the finalizer still holds it
    assert store.get(PODS, "held")["metadata"]["deletionGracePeriodSeconds"] == 0
    store.patch(PODS, "held", {"metadata": {"finalizers": None}})
    assert [item["metadata"]["name"] for item in store.list(PODS)[0]] == ["bound"]


def test_a_namespace_deletes_its_contents_first_type_by_type(store):
    store.create("v1/namespaces", {"metadata": {"name": "team"}})
    store.create(CM, configmap("inside"), "team")
    store.create(CM, configmap("outside"))
    made = plan(store, "v1/namespaces", "team", "Background")
    assert isinstance(made.own, garbage.Remove)
    contents = {step.resource_type.storage_key: step for step in made.before}
    assert all(isinstance(step, garbage.DeleteNamespaceContents) for step in made.before)
    assert "/configmaps" in contents and "/namespaces" not in contents and "/nodes" not in contents
    assert resolve(store, contents["/configmaps"]) == (
        garbage.DeleteObject(("/configmaps", "team", "inside"), "Background", store.resolve(CM)),
    )


def test_a_dependent_with_another_live_owner_only_loses_the_reference(store):
    first = store.create(CM, configmap("first"))
    second = store.create(CM, configmap("second"))
    store.create(CM, configmap("shared", ownerReferences=[reference(first), reference(second)]))
    store.create(CM, configmap("sole", ownerReferences=[reference(first)]))
    uid = first["metadata"]["uid"]
    shared, sole = ("/configmaps", "default", "shared"), ("/configmaps", "default", "sole")
    assert resolve(store, garbage.CollectDependent(shared, uid)) == (garbage.DropOwnerReference(shared, uid),)
    assert resolve(store, garbage.CollectDependent(sole, uid)) == (garbage.DeleteObject(sole, "Background"),)
    assert resolve(store, garbage.CollectDependent(("/configmaps", "default", "gone"), uid)) == ()
    (commit,) = resolve(store, garbage.DropOwnerReference(shared, uid))
    assert isinstance(commit, garbage.Commit)
    assert commit.new["metadata"]["ownerReferences"] == [reference(second)]
    (commit,) = resolve(store, garbage.DropOwnerReference(sole, uid))
    assert isinstance(commit, garbage.Commit) and "ownerReferences" not in commit.new["metadata"]


def test_orphaning_and_foreground_deletion_act_on_the_current_dependents_in_order(store):
    owner = store.create(CM, configmap("owner"))
    for name in ("b", "a"):
        store.create(CM, configmap(name, ownerReferences=[reference(owner)]))
    uid = owner["metadata"]["uid"]
    a, b = ("/configmaps", "default", "a"), ("/configmaps", "default", "b")
    assert resolve(store, garbage.OrphanDependents(uid)) == (
        garbage.DropOwnerReference(a, uid),
        garbage.DropOwnerReference(b, uid),
    )
    assert resolve(store, garbage.DeleteDependentsInForeground(uid)) == (
        garbage.DeleteObject(a, "Foreground"),
        garbage.DeleteObject(b, "Foreground"),
    )
    store.delete(CM, "a")
    assert resolve(store, garbage.OrphanDependents(uid)) == (garbage.DropOwnerReference(b, uid),)


def test_foreground_deletion_finishes_once_no_dependents_remain(store):
    owner = store.create(CM, configmap("owner"))
    store.create(CM, configmap("child", ownerReferences=[reference(owner)]))
    uid = owner["metadata"]["uid"]
    store.patch(CM, "owner", {"metadata": {"finalizers": ["foregroundDeletion"]}})
    owner_id = ("/configmaps", "default", "owner")
    assert resolve(store, garbage.FinishForeground(uid)) == ()
    store.delete(CM, "child")
    assert resolve(store, garbage.FinishForeground(uid)) == (garbage.ReleaseFinalizer(owner_id, "foregroundDeletion"),)


def test_releasing_the_last_finalizer_of_a_marked_object_removes_its_stored_state(store):
    store.create(CM, configmap("held", finalizers=["example.com/x"]))
    held = ("/configmaps", "default", "held")
    (commit,) = resolve(store, garbage.ReleaseFinalizer(held, "example.com/x"))
    assert isinstance(commit, garbage.Commit) and "finalizers" not in commit.new["metadata"]
    store.delete(CM, "held")
    current = stored(store, CM, "held")
    assert resolve(store, garbage.ReleaseFinalizer(held, "example.com/x")) == (
        garbage.Remove(store.resolve(CM), current, current),
    )
    assert resolve(store, garbage.ReleaseFinalizer(held, "orphan")) == ()


def test_collection_after_a_removal_visits_the_listed_dependents_then_the_owners():
    removed = {"metadata": {"name": "x", "uid": "u-x", "ownerReferences": [{"uid": "u-owner"}, {"name": "no-uid"}]}}
    dependents = [("/pods", "default", "a"), ("/configmaps", "default", "b")]
    assert garbage.plan_collection(removed, dependents) == (
        garbage.CollectDependent(("/pods", "default", "a"), "u-x"),
        garbage.CollectDependent(("/configmaps", "default", "b"), "u-x"),
        garbage.FinishForeground("u-owner"),
    )


def test_jobs_default_to_orphan_everything_else_to_background(store):
    assert garbage.default_policy(store.resolve("batch/v1/jobs")) == "Orphan"
    assert garbage.default_policy(store.resolve(CM)) == "Background"
