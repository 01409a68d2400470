"""The store's secondary indexes answer exactly what a scan would: random writes (seeded), then
every kind of LIST and watch start compared with a brute-force filter over all objects."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from gang_sim.apiserver.object_copy import json_copy
from gang_sim.apiserver.selectors import object_matcher
from gang_sim.apiserver.store import Store

NAMESPACES = ("default", "team-a", "team-b")
SELECTORS = [
    ("", ""),
    ("app=a", ""),
    ("app in (a,b)", ""),
    ("app=a,tier=gpu", ""),
    ("app!=a", ""),
    ("!tier", ""),
    ("", "metadata.name=cm-3"),
    ("", "metadata.name==cm-7,metadata.namespace=team-a"),
    ("app=b", "metadata.name=cm-5"),
    ("", "metadata.name!=cm-2"),
    ("", "metadata.namespace=team-b"),
]


def _random_store(seed: int) -> Store:
    rng = random.Random(seed)
    store = Store(seed=seed)
    for namespace in NAMESPACES[1:]:
        store.create("v1/namespaces", {"metadata": {"name": namespace}})
    for _ in range(300):
        namespace, name = rng.choice(NAMESPACES), f"cm-{rng.randrange(12)}"
        labels = {key: rng.choice("ab") for key in ("app", "tier") if rng.random() < 0.6}
        if "tier" in labels:
            labels["tier"] = rng.choice(("gpu", "cpu"))
        action = rng.random()
        try:
            if action < 0.5:
                store.create("v1/configmaps", {"metadata": {"name": name, "labels": labels}}, namespace)
            elif action < 0.8:
                store.patch("v1/configmaps", name, {"metadata": {"labels": labels or None}}, namespace=namespace)
            else:
                store.delete("v1/configmaps", name, namespace)
        except Exception as error:  # 409 exists / 404 missing: part of the random walk
            assert getattr(error, "code", None) in (404, 409), error
    return store


@pytest.mark.parametrize("seed", range(4))
def test_every_list_equals_a_scan(seed: int) -> None:
    store = _random_store(seed)
    everything, _ = store.list("v1/configmaps")
    for namespace in (None, *NAMESPACES):
        for labels, fields in SELECTORS:
            matches = object_matcher(labels, fields, "/configmaps")
            expected = [obj for obj in everything if matches(obj) and namespace in (None, obj["metadata"]["namespace"])]
            listed, _ = store.list("v1/configmaps", namespace, label_selector=labels, field_selector=fields)
            assert listed == expected, (namespace, labels, fields)


def test_a_watch_starts_from_the_indexed_objects_and_sees_only_its_namespace() -> None:
    async def scenario() -> None:
        store = _random_store(9)
        expected = store.list("v1/configmaps", "team-a", label_selector="app=a")[0]
        stream = store.open_watch("v1/configmaps", "team-a", label_selector="app=a")
        everywhere = store.open_watch("v1/configmaps", resource_version=store.resource_version)
        primed = [stream.queue.get_nowait() for _ in range(stream.queue.qsize())]
        by_version = sorted(expected, key=lambda obj: int(obj["metadata"]["resourceVersion"]))
        assert [delivery.obj["metadata"]["name"] for delivery in primed] == [o["metadata"]["name"] for o in by_version]
        assert primed
        store.create("v1/configmaps", {"metadata": {"name": "new-b", "labels": {"app": "a"}}}, "team-b")
        store.create("v1/configmaps", {"metadata": {"name": "new-a", "labels": {"app": "a"}}}, "team-a")
        assert [stream.queue.get_nowait().obj["metadata"]["name"]] == ["new-a"]
        assert stream.queue.empty()
        assert [everywhere.queue.get_nowait().obj["metadata"]["name"] for _ in range(2)] == ["new-b", "new-a"]
        store.close_watch(stream)
        store.close_watch(everywhere)

    asyncio.run(scenario())


def test_a_watch_by_name_gets_only_its_objects_events_in_every_namespace() -> None:
    async def scenario() -> None:
        store = _random_store(3)
        version = store.resource_version
        by_name = store.open_watch("v1/configmaps", field_selector="metadata.name=target", resource_version=version)
        in_a = store.open_watch(
            "v1/configmaps", "team-a", field_selector="metadata.name=target", resource_version=version
        )
        not_name = store.open_watch("v1/configmaps", field_selector="metadata.name!=target", resource_version=version)
        for namespace in ("team-a", "team-b"):
            store.create("v1/configmaps", {"metadata": {"name": "target"}}, namespace)
            store.create("v1/configmaps", {"metadata": {"name": "other"}}, namespace)
        store.delete("v1/configmaps", "target", "team-b")

        def seen(stream: Any) -> list[tuple[str, str, str]]:
            deliveries = [stream.queue.get_nowait() for _ in range(stream.queue.qsize())]
            return [(d.type, d.obj["metadata"]["namespace"], d.obj["metadata"]["name"]) for d in deliveries]

        assert seen(by_name) == [
            ("ADDED", "team-a", "target"),
            ("ADDED", "team-b", "target"),
            ("DELETED", "team-b", "target"),
        ]
        assert seen(in_a) == [("ADDED", "team-a", "target")]
        assert seen(not_name) == [("ADDED", "team-a", "other"), ("ADDED", "team-b", "other")]
        for stream in (by_name, in_a, not_name):
            store.close_watch(stream)

    asyncio.run(scenario())


@pytest.mark.parametrize("seed", range(2))
def test_a_view_is_the_list_without_copies_and_a_write_replaces_what_it_showed(seed: int) -> None:
    store = _random_store(seed)
    shared: list[dict[str, Any]] = []
    store.subscribe(lambda event_type, resource, obj: shared.append(obj), shared=True)
    for namespace in (None, *NAMESPACES):
        viewed = store.view("v1/configmaps", namespace)
        assert viewed == store.list("v1/configmaps", namespace)[0], namespace
        assert [id(obj) for obj in viewed] == [id(obj) for obj in store.view("v1/configmaps", namespace)]
    before = store.view("v1/configmaps", "team-a")
    assert before, "the random walk left objects in team-a"
    snapshot = json_copy(before)
    name = before[0]["metadata"]["name"]
    store.patch("v1/configmaps", name, {"data": {"changed": "yes"}}, namespace="team-a")
    assert before == snapshot  # the store committed a new object; the view shows the old state
    after = store.view("v1/configmaps", "team-a")
    assert after[0]["data"] == {"changed": "yes"}
    assert shared == [after[0]] and shared[0] is after[0]  # the shared subscriber got the stored object


def test_json_copy_is_a_deep_copy() -> None:
    document = {"a": [1, {"b": None, "c": [True, 2.5, "s"]}], "d": {"e": {}}, "f": (1, 2)}
    copied = json_copy(document)
    assert copied == document
    copied["a"][1]["c"].append("x")
    copied["d"]["e"]["g"] = 1
    assert document == {"a": [1, {"b": None, "c": [True, 2.5, "s"]}], "d": {"e": {}}, "f": (1, 2)}
