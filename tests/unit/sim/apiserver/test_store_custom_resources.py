"""The store's CustomResourceDefinitions: served versions follow the CRD, its name must match its group
and plural, and custom resources are validated against its schema."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.crds import install_bundled_crds
from tests.builders import provisioning_request

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


def test_crds_serve_their_versions_until_deleted(store):
    install_bundled_crds(store)
    store.create(PRS, provisioning_request("pr"))
    store.delete("apiextensions.k8s.io/v1/customresourcedefinitions", "provisioningrequests.autoscaling.x-k8s.io")
    with pytest.raises(errors.ApiError) as raised:
        store.list(PRS)
    assert raised.value.code == 404


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
