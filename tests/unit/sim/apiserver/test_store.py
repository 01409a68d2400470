"""The store's apiserver semantics without HTTP: metadata, admission, deletion, GC, watch history."""

from __future__ import annotations

import asyncio

import pytest

from airflow_provider_gang.sim.apiserver import errors
from airflow_provider_gang.sim.apiserver.crds import install_bundled_crds
from airflow_provider_gang.sim.apiserver.store import Store
from tests.builders import config_map, pod, provisioning_request

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


@pytest.fixture
def store() -> Store:
    return Store(seed=1, wall_clock=lambda: 1_800_000_000.0)


def reference(owner: dict, **extra) -> dict:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        **extra,
    }


def test_server_fields_and_one_global_resource_version(store):
    first = store.create(CM, config_map("a"))
    second = store.create(PODS, pod("p"))
    assert first["metadata"]["creationTimestamp"] == "2027-01-15T08:00:00Z"
    assert int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1
    assert store.resource_version == second["metadata"]["resourceVersion"]


def test_seeded_stores_generate_the_same_names_and_uids():
    names = [Store(seed=7).create(CM, {"metadata": {"generateName": "x-"}})["metadata"] for _ in range(2)]
    assert names[0]["name"] == names[1]["name"] and names[0]["uid"] == names[1]["uid"]


def test_generation_bumps_only_on_spec_changes_and_no_op_writes_emit_nothing(store):
    events = []
    store.subscribe(lambda kind, resource, obj: events.append((kind, obj["metadata"]["resourceVersion"])))
    job = store.create(
        "batch/v1/jobs",
        {
            "metadata": {"name": "j"},
            "spec": {
                "parallelism": 1,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                },
            },
        },
    )
    assert job["metadata"]["generation"] == 1
    labelled = store.patch("batch/v1/jobs", "j", {"metadata": {"labels": {"x": "y"}}})
    assert labelled["metadata"]["generation"] == 1
    changed = store.patch("batch/v1/jobs", "j", {"spec": {"parallelism": 2}})
    assert changed["metadata"]["generation"] == 2
    same = store.patch("batch/v1/jobs", "j", {"spec": {"parallelism": 2}})
    assert same["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    assert [kind for kind, _ in events] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert "generation" not in store.create(CM, config_map("no-generation"))["metadata"]  # as upstream ConfigMaps


def test_subscribers_get_copies_in_order_and_can_unsubscribe(store):
    seen = []
    unsubscribe = store.subscribe(lambda kind, resource, obj: seen.append((kind, resource, obj["metadata"]["name"])))
    store.create(CM, config_map("a"))["metadata"]["name"] = "mutated"
    store.delete(CM, "a")
    unsubscribe()
    store.create(CM, config_map("b"))
    assert seen == [("ADDED", CM, "a"), ("DELETED", CM, "a")]


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


def test_crds_serve_their_versions_until_deleted(store):
    install_bundled_crds(store)
    store.create(PRS, provisioning_request("pr"))
    store.delete("apiextensions.k8s.io/v1/customresourcedefinitions", "provisioningrequests.autoscaling.x-k8s.io")
    with pytest.raises(errors.ApiError) as raised:
        store.list(PRS)
    assert raised.value.code == 404


def test_strict_field_validation_rejects_unknown_custom_resource_fields(store):
    install_bundled_crds(store)
    body = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "pr"},
        "spec": {"provisioningClassName": "c", "podSets": [{"count": 1, "podTemplateRef": {"name": "t"}}], "extra": 1},
    }
    with pytest.raises(errors.ApiError) as raised:
        store.create(PRS, body, field_validation="Strict")
    assert raised.value.code == 400 and 'unknown field "spec.extra"' in raised.value.message
    assert "extra" not in store.create(PRS, body)["spec"]


def test_binding_sets_the_node_once_and_never_while_gated(store):
    store.create(PODS, pod("p"))
    bound = store.bind_pod("default", "p", "node-1")
    assert bound["spec"]["nodeName"] == "node-1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    with pytest.raises(errors.ApiError) as raised:
        store.bind_pod("default", "p", "node-2")
    assert raised.value.code == 409
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "x"}]
    store.create(PODS, gated)
    with pytest.raises(errors.ApiError) as raised:
        store.bind_pod("default", "g", "node-1")
    assert raised.value.code == 422


def test_gated_pods_may_only_tighten_required_node_affinity(store):
    gated = pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "x"}]
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
    gated["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    store.create(PODS, gated)
    tighter = {"matchExpressions": [*term["matchExpressions"], {"key": "zone", "operator": "In", "values": ["z"]}]}
    patch = {
        "spec": {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [tighter]}}
            }
        }
    }
    store.patch(PODS, "g", patch)
    looser = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}
                        ]
                    }
                }
            }
        }
    }
    with pytest.raises(errors.ApiError) as raised:
        store.patch(PODS, "g", looser)
    assert raised.value.code == 422


def test_terminal_pod_phase_cannot_change(store):
    store.create(PODS, pod("p"))
    store.patch(PODS, "p", {"status": {"phase": "Succeeded"}}, subresource="status")
    with pytest.raises(errors.ApiError) as raised:
        store.patch(PODS, "p", {"status": {"phase": "Running"}}, subresource="status")
    assert raised.value.code == 422


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "1"}}, "Burstable"),
        ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ],
)
def test_qos_class(store, resources, qos):
    body = pod("p")
    body["spec"]["containers"][0]["resources"] = resources
    assert store.create(PODS, body)["status"]["qosClass"] == qos


async def test_watch_history_is_bounded_and_older_versions_are_410():
    store = Store(history_limit=3)
    first = store.create(CM, config_map("a"))
    for value in ("1", "2", "3", "4"):  # 3 kept events: the one right after ``first`` is forgotten
        store.patch(CM, "a", {"data": {"k": value}})
    with pytest.raises(errors.ApiError) as raised:
        store.open_watch(CM, resource_version=first["metadata"]["resourceVersion"])
    assert raised.value.code == 410
    stream = store.open_watch(CM, resource_version=str(int(store.resource_version) - 1))
    delivery = await asyncio.wait_for(stream.queue.get(), 1)
    assert delivery is not None and delivery.obj["data"] == {"k": "4"}
    store.close_watch(stream)


async def test_watch_iterator_yields_copies_until_closed(store):
    received = []

    async def consume():
        async for kind, obj in store.watch(CM, "default"):
            received.append((kind, obj["metadata"]["name"]))

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    store.create(CM, config_map("a"))
    store.create(CM, config_map("elsewhere"), "kube-system")
    store.delete(CM, "a")
    await asyncio.sleep(0)
    store.close_all_watches()
    await asyncio.wait_for(task, 1)
    assert received == [("ADDED", "a"), ("DELETED", "a")]


def test_updating_a_crd_changes_the_served_versions(store):
    crd = {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                },
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": False,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                },
            ],
        },
    }
    key = "apiextensions.k8s.io/v1/customresourcedefinitions"
    created = store.create(key, crd)
    assert created["status"]["conditions"][1]["type"] == "Established"
    store.create("example.com/v1alpha1/widgets", {"kind": "Widget", "metadata": {"name": "w"}})
    store.patch(
        key,
        "widgets.example.com",
        [{"op": "replace", "path": "/spec/versions/1/served", "value": False}],
        patch_type="json",
    )
    with pytest.raises(errors.ApiError) as raised:
        store.list("example.com/v1alpha1/widgets")
    assert raised.value.code == 404
    assert [w["metadata"]["name"] for w in store.list("example.com/v1/widgets")[0]] == ["w"]


def test_crd_name_must_match_its_group_and_plural(store):
    with pytest.raises(errors.ApiError) as raised:
        store.create(
            "apiextensions.k8s.io/v1/customresourcedefinitions",
            {
                "metadata": {"name": "wrong"},
                "spec": {
                    "group": "example.com",
                    "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            },
        )
    assert raised.value.code == 422 and raised.value.causes[0]["field"] == "metadata.name"


def test_a_failing_subscriber_does_not_fail_the_write(store, caplog):
    def broken(kind, resource, obj):
        raise RuntimeError("subscriber bug")

    store.subscribe(broken)
    store.create(CM, config_map("a"))
    assert store.get(CM, "a")["metadata"]["name"] == "a"
    assert "subscriber bug" in caplog.text


def test_pods_are_removed_at_once_with_a_deletion_stamp_on_their_last_state(store):
    store.create(PODS, pod("p"))
    deleted = store.delete(PODS, "p")
    assert deleted["metadata"]["deletionTimestamp"] and deleted["metadata"]["deletionGracePeriodSeconds"] == 0
    assert store.list(PODS)[0] == []


def test_graceful_pod_deletion_waits_for_the_kubelet():
    store = Store(graceful_pod_deletion=True, wall_clock=lambda: 1_800_000_000.0)
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


def test_creating_with_a_resource_version_is_the_upstream_500(store):
    with pytest.raises(errors.ApiError) as raised:
        store.create(CM, config_map("a", resourceVersion="5"))
    assert raised.value.code == 500


def test_default_tolerations_and_duplicate_schema_causes(store):
    created = store.create(PODS, pod("p"))
    assert {t["key"] for t in created["spec"]["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    install_bundled_crds(store)
    store.create(PRS, provisioning_request("pr"))
    with pytest.raises(errors.ApiError) as raised:
        store.patch(PRS, "pr", {"status": {"conditions": [{"type": "A"}]}}, subresource="status")
    fields = [cause["field"] for cause in raised.value.causes]
    assert len(fields) == len(set(fields)) == 4


def test_clearing_the_last_finalizer_deletes_the_stored_state_as_upstream(store):
    events = []
    store.subscribe(lambda kind, resource, obj: events.append((kind, obj["metadata"].get("finalizers"))))
    store.create(CM, config_map("a", finalizers=["example.com/x"]))
    store.delete(CM, "a")
    answer = store.patch(CM, "a", {"metadata": {"finalizers": None}})
    assert answer["metadata"]["finalizers"] == ["example.com/x"]
    assert events == [("ADDED", ["example.com/x"]), ("MODIFIED", ["example.com/x"]), ("DELETED", ["example.com/x"])]


def test_a_suspended_unstarted_job_accepts_only_scheduling_directive_changes(store):
    store.create(
        "batch/v1/jobs",
        {
            "metadata": {"name": "j"},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
                },
            },
        },
    )
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    patched = store.patch(
        "batch/v1/jobs",
        "j",
        {
            "spec": {
                "template": {
                    "metadata": {"labels": {"kueue": "admitted"}},
                    "spec": {"affinity": affinity, "nodeSelector": {"pool": "a"}},
                }
            }
        },
    )
    assert patched["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    with pytest.raises(errors.ApiError) as raised:
        store.patch(
            "batch/v1/jobs",
            "j",
            {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "x:2"}]}}}},
            patch_type="strategic",
        )
    assert raised.value.causes[0]["field"] == "spec.template"
    store.patch("batch/v1/jobs", "j", {"status": {"startTime": "2027-01-15T08:00:00Z"}}, subresource="status")
    with pytest.raises(errors.ApiError):
        store.patch("batch/v1/jobs", "j", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}})


def test_annotations_are_limited_to_256_kib_in_total(store):
    with pytest.raises(errors.ApiError) as raised:
        store.create(CM, config_map("big", annotations={"a": "x" * (256 * 1024)}))
    assert raised.value.causes[0]["reason"] == "FieldValueTooLong"


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


def test_pod_templates_and_secrets_are_defaulted(store):
    template = store.create(
        "v1/podtemplates",
        {"metadata": {"name": "t"}, "template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}},
    )
    assert template["template"]["spec"]["restartPolicy"] == "Always"
    assert template["template"]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    with pytest.raises(errors.ApiError) as raised:
        store.create("v1/podtemplates", {"metadata": {"name": "empty"}, "template": {"spec": {"containers": []}}})
    assert raised.value.causes[0]["field"] == "template.spec.containers"
    secret = store.create("v1/secrets", {"metadata": {"name": "s"}, "stringData": {"token": "abc"}})
    assert secret["data"] == {"token": "YWJj"} and secret["type"] == "Opaque" and "stringData" not in secret
