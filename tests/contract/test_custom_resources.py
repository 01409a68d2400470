"""Custom resources through the sync client: server-set metadata, errors, patches, status, PUT, delete."""

from __future__ import annotations

import re

import pytest
from kubernetes import client

from tests.builders import provisioning_request

from .conftest import Cluster, require_version, status_of

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"


@pytest.fixture
def objects(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api)


def create(objects: client.CustomObjectsApi, namespace: str, body: dict) -> dict:
    return objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def test_create_returns_the_stored_object_with_server_fields(objects, namespace):
    created = create(objects, namespace, provisioning_request("pr1"))
    metadata = created["metadata"]
    assert metadata["namespace"] == namespace
    assert metadata["uid"] and metadata["resourceVersion"] and metadata["creationTimestamp"]
    assert metadata["generation"] == 1
    assert created["kind"] == "ProvisioningRequest" and created["apiVersion"] == "autoscaling.x-k8s.io/v1"


def test_generate_name_appends_a_suffix(objects, namespace):
    body = provisioning_request("")
    body["metadata"] = {"generateName": "gang-"}
    created = create(objects, namespace, body)
    assert created["metadata"]["name"].startswith("gang-") and len(created["metadata"]["name"]) == len("gang-") + 5


def test_duplicate_create_is_409_already_exists(objects, namespace):
    create(objects, namespace, provisioning_request("pr1"))
    with pytest.raises(client.ApiException) as raised:
        create(objects, namespace, provisioning_request("pr1"))
    assert raised.value.status == 409
    assert status_of(raised.value)["reason"] == "AlreadyExists"


def test_get_missing_is_404_not_found_status(objects, namespace):
    with pytest.raises(client.ApiException) as raised:
        objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "absent")
    status = status_of(raised.value)
    assert raised.value.status == 404
    assert (status["kind"], status["status"], status["reason"]) == ("Status", "Failure", "NotFound")
    assert status["details"]["name"] == "absent"


def test_list_envelope_selectors_and_pages(objects, namespace):
    for name, app in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        create(objects, namespace, provisioning_request(name, labels={"app": app}))
    listed = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert listed["kind"] == "ProvisioningRequestList" and listed["metadata"]["resourceVersion"]
    names = lambda result: [item["metadata"]["name"] for item in result["items"]]  # noqa: E731
    assert names(objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="app=a")) == [
        "a1",
        "a2",
    ]
    assert names(
        objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="app notin (a)")
    ) == ["b1"]
    assert names(objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, label_selector="!app")) == []
    assert names(
        objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, field_selector="metadata.name=a2")
    ) == ["a2"]
    first = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, limit=2)
    assert names(first) == ["a1", "a2"] and first["metadata"]["continue"]
    rest = objects.list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, limit=2, _continue=first["metadata"]["continue"]
    )
    assert names(rest) == ["b1"] and rest["metadata"]["continue"] == ""  # unstructured lists keep the empty token


def test_merge_patch_and_explicit_json_patch(objects, namespace):
    create(objects, namespace, provisioning_request("pr1"))
    merged = objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pr1", {"metadata": {"labels": {"x": "1"}}}
    )
    assert merged["metadata"]["labels"] == {"x": "1"}
    patched = objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "pr1",
        [{"op": "add", "path": "/metadata/labels/y", "value": "2"}],
        _content_type="application/json-patch+json",
    )
    assert patched["metadata"]["labels"] == {"x": "1", "y": "2"}
    assert int(patched["metadata"]["resourceVersion"]) > int(merged["metadata"]["resourceVersion"])


def test_json_patch_list_sent_by_the_sync_client_as_merge_patch_is_400(objects, namespace):
    """kubernetes 36 CustomObjectsApi always sends merge-patch+json; the server's strict decoder (field
    validation defaults to Warn) rejects a list body before patching (``handlers/patch.go``)."""
    create(objects, namespace, provisioning_request("pr1"))
    with pytest.raises(client.ApiException) as raised:
        objects.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "pr1", [{"op": "add", "path": "/metadata/labels", "value": {}}]
        )
    status = status_of(raised.value)
    assert (raised.value.status, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (
        "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}"
    )


def test_failed_json_patch_test_is_422_and_changes_nothing(objects, namespace):
    before = create(objects, namespace, provisioning_request("pr1"))
    with pytest.raises(client.ApiException) as raised:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "pr1",
            [
                {"op": "test", "path": "/spec/podSets/0/count", "value": 99},
                {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}},
            ],
            _content_type="application/json-patch+json",
        )
    assert raised.value.status == 422
    after = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pr1")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_strategic_merge_patch_on_a_custom_resource_is_415(objects, namespace):
    create(objects, namespace, provisioning_request("pr1"))
    with pytest.raises(client.ApiException) as raised:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "pr1",
            {"metadata": {"labels": {"a": "b"}}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert raised.value.status == 415
    assert status_of(raised.value)["reason"] == "UnsupportedMediaType"


def test_status_subresource_changes_only_status_and_main_resource_ignores_status(objects, namespace):
    create(objects, namespace, provisioning_request("pr1"))
    condition = {
        "type": "Provisioned",
        "status": "True",
        "reason": "R",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    updated = objects.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "pr1",
        {"status": {"conditions": [condition]}, "metadata": {"labels": {"ignored": "yes"}}},
    )
    assert updated["status"]["conditions"][0]["type"] == "Provisioned"
    assert "ignored" not in (updated["metadata"].get("labels") or {})
    assert updated["metadata"]["generation"] == 1
    main = objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pr1", {"status": {"conditions": []}, "metadata": {"labels": {"a": "b"}}}
    )
    assert main["status"]["conditions"][0]["type"] == "Provisioned"
    assert main["metadata"]["generation"] == 1


def test_spec_change_bumps_generation_and_no_op_keeps_resource_version(objects, namespace):
    body = provisioning_request("pr1")
    body["spec"]["parameters"] = {"a": "1"}
    created = create(objects, namespace, body)
    same = objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pr1", {"metadata": {"labels": {}}}
    )
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_put_needs_a_resource_version_and_a_stale_one_is_409(objects, namespace):
    created = create(objects, namespace, provisioning_request("pr1"))
    without = dict(created, metadata={"name": "pr1", "namespace": namespace})
    with pytest.raises(client.ApiException) as raised:
        objects.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pr1", without)
    assert raised.value.status == 422
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pr1", {"metadata": {"labels": {"a": "b"}}}
    )
    with pytest.raises(client.ApiException) as raised:
        objects.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pr1", created)
    assert raised.value.status == 409
    assert status_of(raised.value)["reason"] == "Conflict"
    stored = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pr1")
    assert stored["metadata"]["labels"] == {"a": "b"}


def test_patch_with_a_stale_resource_version_is_409(objects, namespace):
    created = create(objects, namespace, provisioning_request("pr1"))
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pr1", {"metadata": {"labels": {"a": "b"}}}
    )
    with pytest.raises(client.ApiException) as raised:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "pr1",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"c": "d"}}},
        )
    assert raised.value.status == 409


def test_schema_violation_is_422_with_field_paths_and_nothing_is_stored(objects, namespace):
    body = provisioning_request("bad")
    body["spec"]["podSets"][0]["count"] = "four"
    del body["spec"]["provisioningClassName"]
    with pytest.raises(client.ApiException) as raised:
        create(objects, namespace, body)
    status = status_of(raised.value)
    assert raised.value.status == 422 and status["reason"] == "Invalid"
    fields = {re.sub(r"\[\d+\]", "", cause["field"]) for cause in status["details"]["causes"]}  # 1.20: no index
    assert {"spec.podSets.count", "spec.provisioningClassName"} <= fields
    assert objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"] == []


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"podSets": "x"},
            "spec.podSets",
            'Invalid value: "string": spec.podSets in body must be of type array: "string"',
        ),
        (
            {"parameters": {"a": 7}},
            "spec.parameters.a",
            'Invalid value: "integer": spec.parameters.a in body must be of type string: "integer"',
        ),
        (
            {"podSets": [{"count": True, "podTemplateRef": {"name": "t"}}]},
            "spec.podSets[0].count",
            'Invalid value: "": spec.podSets[0].count in body must be of type int32: ""',
        ),
        ({"provisioningClassName": None}, "spec.provisioningClassName", "Required value"),
    ],
    ids=["string-for-array", "integer-for-string", "boolean-for-int32", "null-is-absent"],
)
def test_a_wrong_typed_field_names_its_json_type_not_its_value(objects, namespace, spec, field, message):
    """kube-openapi's type validator (``pkg/validation/validate/type.go``) reports the JSON type it
    found, or the formats where the schema has one (``count`` is an ``int32``); a null where the schema
    does not allow it is dropped first (``apiextensions-apiserver`` prunes non-nullable nulls)."""
    body = provisioning_request("typed")
    body["spec"].update(spec)
    with pytest.raises(client.ApiException) as raised:
        create(objects, namespace, body)
    assert raised.value.status == 422
    causes = status_of(raised.value)["details"]["causes"]
    reason = "FieldValueRequired" if message == "Required value" else "FieldValueTypeInvalid"
    assert {"reason": reason, "field": field, "message": message} in causes, causes


def test_immutable_spec_field_is_422_and_unchanged(cluster, objects, namespace):
    require_version(cluster, 25, "x-kubernetes-validations (CEL) transition rules")
    create(objects, namespace, provisioning_request("pr1", count=4))
    with pytest.raises(client.ApiException) as raised:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            "pr1",
            {"spec": {"podSets": [{"count": 8, "podTemplateRef": {"name": "tpl"}}]}},
        )
    status = status_of(raised.value)
    assert raised.value.status == 422
    assert status["details"]["causes"][0]["field"] == "spec.podSets"
    assert "immutable" in status["message"]
    stored = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pr1")
    assert stored["spec"]["podSets"][0]["count"] == 4


def test_unknown_fields_are_pruned_by_default(objects, namespace):
    body = provisioning_request("pr1")
    body["spec"]["notInSchema"] = True
    created = create(objects, namespace, body)
    assert "notInSchema" not in created["spec"]


def test_delete_answers_success_status_and_finalizers_defer_removal(objects, namespace):
    create(objects, namespace, provisioning_request("plain"))
    deleted = objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "plain")
    assert (deleted["kind"], deleted["status"]) == ("Status", "Success")
    body = provisioning_request("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    create(objects, namespace, body)
    pending = objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    assert pending["metadata"]["deletionTimestamp"]
    still = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    assert still["metadata"]["deletionTimestamp"]
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "held", {"metadata": {"finalizers": None}}
    )
    with pytest.raises(client.ApiException) as raised:
        objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    assert raised.value.status == 404


def test_served_versions_share_storage(objects, namespace):
    create(objects, namespace, provisioning_request("pr1"))
    old_version = objects.get_namespaced_custom_object(GROUP, "v1beta1", namespace, PLURAL, "pr1")
    assert old_version["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
