"""The store without HTTP: server-set metadata, one global resource version, no-op writes, subscribers
and the bounded watch history."""

from __future__ import annotations

import asyncio

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.store import Store
from tests.builders import config_map, pod

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


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


def test_creating_with_a_resource_version_is_the_upstream_500(store):
    with pytest.raises(errors.ApiError) as raised:
        store.create(CM, config_map("a", resourceVersion="5"))
    assert raised.value.code == 500


def test_annotations_are_limited_to_256_kib_in_total(store):
    with pytest.raises(errors.ApiError) as raised:
        store.create(CM, config_map("big", annotations={"a": "x" * (256 * 1024)}))
    assert raised.value.causes[0]["reason"] == "FieldValueTooLong"


def test_subscribers_get_copies_in_order_and_can_unsubscribe(store):
    seen = []
    unsubscribe = store.subscribe(lambda kind, resource, obj: seen.append((kind, resource, obj["metadata"]["name"])))
    store.create(CM, config_map("a"))["metadata"]["name"] = "mutated"
    store.delete(CM, "a")
    unsubscribe()
    store.create(CM, config_map("b"))
    assert seen == [("ADDED", CM, "a"), ("DELETED", CM, "a")]


def test_a_failing_subscriber_does_not_fail_the_write(store, caplog):
    def broken(kind, resource, obj):
        raise RuntimeError("subscriber bug")

    store.subscribe(broken)
    store.create(CM, config_map("a"))
    assert store.get(CM, "a")["metadata"]["name"] == "a"
    assert "subscriber bug" in caplog.text


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
