"""Field ownership without HTTP: FieldsV1 encoding, Update entries, server-side apply merge/prune/conflicts."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors, managed_fields, server_side_apply
from gang_sim.apiserver.crds import install_bundled_crds
from gang_sim.apiserver.managed_fields import Shape
from gang_sim.apiserver.store import Store

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


@pytest.fixture
def clock() -> list[float]:
    return [1_800_000_000.0]


@pytest.fixture
def store(clock: list[float]) -> Store:
    return Store(seed=1, wall_clock=lambda: clock[0])


def owners(obj: dict) -> dict[tuple[str, str], dict]:
    return {(entry["manager"], entry["operation"]): entry for entry in obj["metadata"].get("managedFields", [])}


def apply(store: Store, resource: str, body: dict, manager: str, *, force: bool = False, **options) -> dict:
    name = body["metadata"]["name"]
    return store.patch(resource, name, body, patch_type="apply", field_manager=manager, force=force, **options)


def pod(image: str = "busybox:1.36", **extra) -> dict:
    container = {"name": "main", "image": image, **extra}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}


def test_fields_v1_round_trips_with_members_that_have_members_below():
    paths = {("f:metadata", "f:labels"), ("f:metadata", "f:labels", "f:a"), ("f:spec", 'k:{"name":"x"}')}
    encoded = managed_fields.encode_fields(paths)
    assert encoded == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
        "f:spec": {'k:{"name":"x"}': {}},
    }
    assert managed_fields.decode_fields(encoded) == paths


def test_paths_print_as_upstream_fieldpath():
    path = ("f:spec", "f:containers", 'k:{"name":"main"}', "f:image")
    assert server_side_apply.path_text(path) == '.spec.containers[name="main"].image'
    assert server_side_apply.path_text(("f:metadata", "f:finalizers", 'v:"a/b"')) == '.metadata.finalizers[="a/b"]'
    assert server_side_apply.path_text(("f:items", "i:2")) == ".items[2]"


def test_an_undecodable_fields_v1_is_rejected():
    with pytest.raises(ValueError):
        managed_fields.decode_fields({"x:nonsense": {}})
    assert managed_fields.decode_entries([{"manager": "m", "fieldsV1": {"bad": {}}}]) is None


def test_the_manager_is_the_user_agent_before_its_first_slash():
    assert managed_fields.manager_from_user_agent("kubectl/v1.37.0 (linux/amd64) kubernetes/abc") == "kubectl"
    assert managed_fields.manager_from_user_agent("") == managed_fields.DEFAULT_MANAGER


def test_create_owns_the_defaults_it_got_and_a_later_update_moves_only_changed_fields(store, clock):
    created = store.create(PODS, pod(), "default", field_manager="creator")
    fields = owners(created)[("creator", "Update")]["fieldsV1"]
    container = fields["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert {"f:image", "f:name", "."} <= set(container) and "f:status" not in fields
    clock[0] += 61.5
    updated = store.patch(
        PODS,
        "p",
        {"spec": {"containers": [{"name": "main", "image": "b:2"}]}},
        namespace="default",
        patch_type="strategic",
        field_manager="editor",
    )
    entries = owners(updated)
    assert entries[("editor", "Update")]["fieldsV1"] == {
        "f:spec": {"f:containers": {'k:{"name":"main"}': {"f:image": {}}}}
    }
    assert entries[("editor", "Update")]["time"] == "2027-01-15T08:01:01Z"
    assert "f:image" not in entries[("creator", "Update")]["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"main"}']


def test_an_update_that_changes_nothing_keeps_the_object_and_its_times(store, clock):
    created = store.create(CM, {"metadata": {"name": "c"}, "data": {"a": "1"}}, "default", field_manager="m")
    clock[0] += 100
    again = store.patch(CM, "c", {"data": {"a": "1"}}, namespace="default", field_manager="m")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == created["metadata"]["managedFields"]


def test_removed_fields_leave_every_manager_and_empty_entries_go(store):
    store.create(CM, {"metadata": {"name": "c"}, "data": {"a": "1"}}, "default", field_manager="creator")
    store.patch(CM, "c", {"data": {"b": "2"}}, namespace="default", field_manager="adder")
    removed = store.patch(CM, "c", {"data": {"b": None}}, namespace="default", field_manager="remover")
    assert set(owners(removed)) == {("creator", "Update")}


def test_a_client_may_replace_the_entries_and_invalid_ones_are_ignored(store):
    created = store.create(CM, {"metadata": {"name": "c"}, "data": {"a": "1"}}, "default", field_manager="creator")
    bogus = dict(created, metadata=dict(created["metadata"], managedFields=[{"fieldsV1": {"nonsense": 1}}]))
    kept = store.replace(CM, bogus, namespace="default", field_manager="creator")
    assert kept["metadata"]["managedFields"] == created["metadata"]["managedFields"]
    handed_over = [dict(created["metadata"]["managedFields"][0], manager="someone-else")]
    reset = store.replace(
        CM, dict(created, metadata=dict(created["metadata"], managedFields=handed_over)), namespace="default"
    )
    assert set(owners(reset)) == {("someone-else", "Update")}


def test_a_status_write_records_its_subresource(store):
    store.create(PODS, pod(), "default", field_manager="creator")
    written = store.patch(
        PODS, "p", {"status": {"phase": "Running"}}, namespace="default", subresource="status", field_manager="kubelet"
    )
    entry = owners(written)[("kubelet", "Update")]
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_apply_merges_keyed_lists_by_key_and_sets_as_sets(store):
    body = pod()
    body["metadata"]["finalizers"] = ["a.example/x"]
    apply(store, PODS, body, "alice", namespace="default")
    sidecar = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "finalizers": ["b.example/y"]},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    merged = apply(store, PODS, sidecar, "bob", namespace="default")
    assert merged["metadata"]["finalizers"] == ["a.example/x", "b.example/y"]
    assert owners(merged)[("bob", "Apply")]["fieldsV1"]["f:metadata"] == {"f:finalizers": {'v:"b.example/y"': {}}}
    assert len(merged["spec"]["containers"]) == 1


def test_several_conflicts_are_listed_by_manager(store):
    store.create(CM, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "1"}}, "default", field_manager="one")
    store.patch(CM, "c", {"data": {"c": "1"}}, namespace="default", field_manager="two")
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {"a": "2", "b": "2", "c": "2"},
    }
    with pytest.raises(errors.ApiError) as raised:
        apply(store, CM, config, "alice", namespace="default")
    assert raised.value.code == 409
    assert raised.value.message == (
        'Apply failed with 3 conflicts: conflicts with "one" using v1:\n- .data.a\n- .data.b\n'
        'conflicts with "two" using v1:\n- .data.c'
    )
    assert [cause["field"] for cause in raised.value.causes] == [".data.a", ".data.b", ".data.c"]
    assert store.get(CM, "c", "default")["data"] == {"a": "1", "b": "1", "c": "1"}


def test_a_conflict_with_an_applier_names_it_without_a_version(store):
    apply(store, PODS, pod(), "alice", namespace="default")
    with pytest.raises(errors.ApiError) as raised:
        apply(store, PODS, pod("busybox:1.37"), "bob", namespace="default")
    assert raised.value.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "alice"',
            "field": '.spec.containers[name="main"].image',
        }
    ]


def test_dropping_a_list_item_from_the_applied_configuration_removes_it(store):
    two = pod()
    two["spec"]["containers"].append({"name": "side", "image": "busybox:1.36"})
    apply(store, PODS, two, "alice", namespace="default")
    # a pod's containers cannot be removed (immutable spec): the pruned object is rejected as upstream does
    with pytest.raises(errors.ApiError) as raised:
        apply(store, PODS, pod(), "alice", namespace="default")
    assert raised.value.code == 422
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1", "b": "1"}}}
    apply(store, CM, config, "alice", namespace="default")
    config["metadata"]["labels"] = {"a": "1"}
    pruned = apply(store, CM, config, "alice", namespace="default")
    assert pruned["metadata"]["labels"] == {"a": "1"}


def test_an_apply_to_a_missing_subresource_target_is_404_and_a_mismatched_name_400(store):
    status = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}}
    with pytest.raises(errors.ApiError) as missing:
        apply(store, PODS, status, "kubelet", namespace="default", subresource="status")
    assert missing.value.code == 404
    with pytest.raises(errors.ApiError) as renamed:
        store.patch(
            CM, "c", {"metadata": {"name": "other"}}, namespace="default", patch_type="apply", field_manager="m"
        )
    assert renamed.value.code == 400


def test_apply_of_status_owns_only_status_and_the_main_resource_ignores_it(store):
    body = pod()
    body["status"] = {"phase": "Running"}
    created = apply(store, PODS, body, "alice", namespace="default")
    assert "f:status" not in owners(created)[("alice", "Apply")]["fieldsV1"]
    written = apply(store, PODS, body, "kubelet", namespace="default", subresource="status")
    entry = owners(written)[("kubelet", "Apply")]
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:phase": {}}}
    assert written["status"]["phase"] == "Running"


def test_new_object_nodes_are_members_for_custom_resources_only():
    changed, removed = managed_fields.compare({}, {"spec": {"x": 1}}, Shape(custom=True))
    assert changed == {("f:spec",), ("f:spec", "f:x")} and not removed
    changed, _ = managed_fields.compare({}, {"spec": {"x": 1}}, Shape(custom=False))
    assert changed == {("f:spec", "f:x")}


def test_custom_resource_lists_follow_their_schema_list_type():
    keyed = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "name"]}
    items = managed_fields.list_items("anything", [{"name": "a", "port": 1, "x": 2}], keyed)
    assert items == [('k:{"name":"a","port":1}', {"name": "a", "port": 1, "x": 2})]
    assert managed_fields.list_items("names", ["a"], {"x-kubernetes-list-type": "set"}) == [('v:"a"', "a")]
    assert managed_fields.list_items("containers", [{"name": "a"}], {}) is None  # undeclared: atomic
    assert managed_fields.list_items("containers", [{"name": "a"}], None) is not None  # built-in rules


def test_an_atomic_custom_resource_list_conflicts_as_a_whole_and_metadata_keeps_built_in_rules(store):
    install_bundled_crds(store)
    request = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "pr", "finalizers": ["a.example/x"]},
        "spec": {"provisioningClassName": "c", "podSets": [{"count": 1, "podTemplateRef": {"name": "t"}}]},
    }
    created = apply(store, PRS, request, "alice", namespace="default")
    fields = owners(created)[("alice", "Apply")]["fieldsV1"]
    assert fields["f:spec"]["f:podSets"] == {} and fields["f:metadata"] == {"f:finalizers": {'v:"a.example/x"': {}}}
    request["spec"]["podSets"][0]["count"] = 2
    with pytest.raises(errors.ApiError) as raised:
        apply(store, PRS, request, "bob", namespace="default")
    assert [cause["field"] for cause in raised.value.causes] == [".spec.podSets"]
