"""Watch semantics through the sync and asyncio clients: order, resume, selectors, 410, timeout."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client, watch
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio import config as async_config
from kubernetes_asyncio import watch as async_watch

from tests.builders import provisioning_request

from .conftest import Cluster

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"


def collect(stream, count: int) -> list[tuple[str, str]]:
    seen = []
    for event in stream:
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) == count:
            break
    return seen


def test_watch_from_a_list_resource_version_sees_every_change_in_order(cluster: Cluster, namespace):
    objects = client.CustomObjectsApi(cluster.api)
    start = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["metadata"]["resourceVersion"]
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, provisioning_request("w1"))
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, provisioning_request("w2"))
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "w1", {"metadata": {"labels": {"a": "b"}}}
    )
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "w1")
    watcher = watch.Watch()
    stream = watcher.stream(
        objects.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version=start,
        timeout_seconds=5,
    )
    assert collect(stream, 4) == [("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    watcher.stop()


def test_watch_without_resource_version_starts_with_the_current_objects(cluster: Cluster, namespace):
    objects = client.CustomObjectsApi(cluster.api)
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, provisioning_request("w1"))
    watcher = watch.Watch()
    stream = watcher.stream(objects.list_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, timeout_seconds=5)
    assert collect(stream, 1) == [("ADDED", "w1")]
    watcher.stop()


def test_label_selector_watch_sees_objects_enter_and_leave(cluster: Cluster, namespace):
    core = client.CoreV1Api(cluster.api)
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c1", "labels": {"app": "a"}}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "c2", "labels": {"app": "b"}}})
    core.patch_namespaced_config_map("c1", namespace, {"metadata": {"labels": {"app": "b"}}})
    core.patch_namespaced_config_map("c2", namespace, {"metadata": {"labels": {"app": "a"}}})
    watcher = watch.Watch()
    stream = watcher.stream(
        core.list_namespaced_config_map, namespace, label_selector="app=a", resource_version=start, timeout_seconds=5
    )
    seen = [(event["type"], event["object"].metadata.name) for _, event in zip(range(3), stream, strict=False)]
    watcher.stop()
    assert seen == [("ADDED", "c1"), ("DELETED", "c1"), ("ADDED", "c2")]


def test_watch_from_a_compacted_resource_version_is_410_expired(cluster: Cluster, namespace):
    objects = client.CustomObjectsApi(cluster.api)
    watcher = watch.Watch()
    with pytest.raises(client.ApiException) as raised:
        for _ in watcher.stream(
            objects.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            resource_version="1",
            timeout_seconds=5,
        ):
            pass
    assert raised.value.status == 410


def test_raw_watch_ends_at_timeout_seconds_with_an_error_event_for_410(cluster: Cluster, namespace):
    # PodTemplates: a kind no controller writes (kube-controller-manager puts the ConfigMap
    # kube-root-ca.crt into every namespace), so the fresh namespace has none.
    status, body = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/podtemplates?watch=true&timeoutSeconds=1")
    assert status == 200 and body == ""
    # A custom resource's watch cache starts with its CRD, so version 1 is older than it on any server.
    status, body = cluster.raw(
        "GET",
        f"/apis/autoscaling.x-k8s.io/v1/namespaces/{namespace}/provisioningrequests"
        "?watch=1&resourceVersion=1&timeoutSeconds=1",
    )
    assert status == 200
    assert body["type"] == "ERROR" and body["object"]["code"] == 410 and body["object"]["reason"] == "Expired"


@pytest.mark.parametrize(
    "start",
    ["", "&resourceVersion=0", "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"],
    ids=["no-resource-version", "resource-version-0", "send-initial-events"],
)
def test_initial_events_end_with_a_bookmark_at_the_listed_version(cluster: Cluster, namespace, start):
    """Watch-list (KEP-3157; a watch from no version is defaulted to it since 1.34): the current objects as
    ADDED, then one BOOKMARK annotated ``k8s.io/initial-events-end``. Periodic bookmarks may follow (a
    real apiserver sends them about once a minute, once the version moved); they are not asserted."""
    core = client.CoreV1Api(cluster.api)
    template = {"metadata": {"name": "t1"}, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}}
    created = core.create_namespaced_pod_template(namespace, template)
    status, body = cluster.raw(
        "GET",
        f"/api/v1/namespaces/{namespace}/podtemplates?watch=true&allowWatchBookmarks=true&timeoutSeconds=1{start}",
    )
    assert status == 200
    events = [json.loads(line) for line in body.splitlines()] if isinstance(body, str) else [body]
    types = [event["type"] for event in events]
    assert types[:2] == ["ADDED", "BOOKMARK"] and set(types[2:]) <= {"BOOKMARK"}, types  # then periodic ones
    bookmark = events[1]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["metadata"]["resourceVersion"]) >= int(created.metadata.resource_version)


def test_send_initial_events_needs_resource_version_match_not_older_than(cluster: Cluster, namespace):
    status, body = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/podtemplates?watch=true&sendInitialEvents=true")
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    )
    status, body = cluster.raw(
        "GET",
        f"/api/v1/namespaces/{namespace}/podtemplates?watch=true&sendInitialEvents=false"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    assert (status, body) == (200, "")  # no initial events, hence no bookmark ending them


async def test_asyncio_client_watch_and_its_json_patch_default(cluster: Cluster, namespace):
    api = await async_config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    try:
        objects = async_client.CustomObjectsApi(api)
        listed = await objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        created = await objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, provisioning_request("a1")
        )
        assert created["metadata"]["uid"]
        with pytest.raises(async_client.ApiException) as raised:  # a dict sent as json-patch+json
            await objects.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, "a1", {"metadata": {"labels": {"x": "y"}}}
            )
        assert raised.value.status == 400
        await objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "a1",
            {"metadata": {"labels": {"x": "y"}}},
            _content_type="application/merge-patch+json",
        )
        await objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "a1")
        seen = []
        async with async_watch.Watch() as watcher:  # closing it releases the streaming response
            async for event in watcher.stream(
                objects.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=5,
            ):
                seen.append((event["type"], event["object"]["metadata"]["name"]))
                if len(seen) == 3:
                    break
        assert seen == [("ADDED", "a1"), ("MODIFIED", "a1"), ("DELETED", "a1")]
    finally:
        await api.close()
        # aiohttp closes TLS connections asynchronously; give them a moment before the test loop ends
        # (aiohttp docs, "Graceful Shutdown").
        await asyncio.sleep(0.25)
