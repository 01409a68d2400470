"""Bad input gets the real answer and stores nothing."""

from __future__ import annotations

import json

from kubernetes import client

from tests.builders import provisioning_request

from .conftest import Cluster

PRS = "/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests"


def stored_names(cluster: Cluster, namespace: str) -> list[str]:
    listed = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests"
    )
    return [item["metadata"]["name"] for item in listed["items"]]


def test_malformed_json_is_400(cluster: Cluster, namespace):
    status, body = cluster.raw("POST", PRS.format(ns=namespace), b'{"apiVersion": "autoscaling.x-k8s.io/v1", "kind": ')
    assert status == 400 and body["reason"] == "BadRequest" and body["kind"] == "Status"
    assert stored_names(cluster, namespace) == []


def test_a_custom_resource_without_kind_is_400_naming_the_missing_kind(cluster: Cluster, namespace):
    body = json.dumps({"apiVersion": "autoscaling.x-k8s.io/v1", "metadata": {"name": "kindless"}}).encode()
    status, answer = cluster.raw("POST", PRS.format(ns=namespace), body)
    assert status == 400 and answer["reason"] == "BadRequest"
    assert "Object 'Kind' is missing in '" in answer["message"]
    assert stored_names(cluster, namespace) == []


def test_a_built_in_list_has_no_continue_token_on_its_last_page(cluster: Cluster, namespace):
    status, listed = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert status == 200 and "continue" not in listed["metadata"]


def test_unknown_resource_is_404(cluster: Cluster, namespace):
    status, body = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/gadgets")
    assert status == 404 and body["reason"] == "NotFound"
    status, _ = cluster.raw(
        "POST", f"/api/v1/namespaces/{namespace}/gadgets", json.dumps({"metadata": {"name": "g"}}).encode()
    )
    assert status == 404
    # Custom API groups and groups nobody serves: the mux answers, not a Status.
    for path in (
        f"/apis/autoscaling.x-k8s.io/v1/namespaces/{namespace}/gadgets",
        "/apis/nothing.example.com/v1/things",
    ):
        status, body = cluster.raw("GET", path)
        assert (status, body) == (404, "404 page not found\n")


def test_kind_mismatch_is_422_for_custom_resources_and_400_for_built_ins(cluster: Cluster, namespace):
    body = dict(provisioning_request("pr"), kind="Workload")
    status, answer = cluster.raw("POST", PRS.format(ns=namespace), json.dumps(body).encode())
    assert status == 422 and answer["reason"] == "Invalid"
    assert answer["details"]["causes"][0]["field"] == "kind"
    assert stored_names(cluster, namespace) == []
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    status, answer = cluster.raw("POST", f"/api/v1/namespaces/{namespace}/pods", json.dumps(configmap).encode())
    assert status == 400 and "cannot be handled as a Pod" in answer["message"]


def test_missing_name_is_422(cluster: Cluster, namespace):
    body = provisioning_request("x")
    body["metadata"] = {}
    status, answer = cluster.raw("POST", PRS.format(ns=namespace), json.dumps(body).encode())
    assert status == 422 and answer["reason"] == "Invalid"
    assert answer["details"]["causes"][0]["field"] == "metadata.name"


def test_patch_with_an_unknown_content_type_is_415(cluster: Cluster, namespace):
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", provisioning_request("pr")
    )
    status, answer = cluster.raw("PATCH", PRS.format(ns=namespace) + "/pr", b"{}", content_type="text/plain")
    assert status == 415 and answer["reason"] == "UnsupportedMediaType"


def test_json_patch_with_an_object_body_is_400(cluster: Cluster, namespace):
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", provisioning_request("pr")
    )
    status, _ = cluster.raw(
        "PATCH", PRS.format(ns=namespace) + "/pr", b'{"metadata": {}}', content_type="application/json-patch+json"
    )
    assert status == 400


def test_invalid_label_selector_is_400(cluster: Cluster, namespace):
    status, answer = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=a%20in%20(b")
    assert status == 400 and answer["reason"] == "BadRequest"


def test_unsupported_field_selector_is_400(cluster: Cluster, namespace):
    status, answer = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/configmaps?fieldSelector=data.x%3Dy")
    assert (status, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    status, answer = cluster.raw("GET", f"/api/v1/namespaces/{namespace}/pods?fieldSelector=data.x%3Dy")
    assert (status, answer["message"]) == (400, "field label not supported: data.x")
