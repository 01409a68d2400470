"""CEL ``x-kubernetes-validations`` of the bundled CRDs: one rule of each CRD that has rules.

Messages and field paths are upstream's (``apiextensions-apiserver`` ``schema/cel/validation.go``):
``<path>: Invalid value: "<the string>": <message>`` for a rule on a string, ``<path>: Invalid value:
<message>`` for one on an object or array (the value is left out), ``<nil>`` for the object's root.
CEL validation needs Kubernetes >= 1.25; older servers skip these tests.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.builders import provisioning_request

from .conftest import Cluster, require_version, status_of

KUEUE = "kueue.x-k8s.io"
_CRDS = Path(__file__).resolve().parents[2] / "airflow_provider_gang" / "sim" / "crds"
_NUMBERS = itertools.count(1)


@pytest.fixture(scope="module")
def objects(cluster: Cluster) -> Iterator[client.CustomObjectsApi]:
    require_version(cluster, 25, "x-kubernetes-validations (CEL)")
    if not cluster.is_emulator:
        for plural in ("admissionchecks", "clusterqueues", "localqueues", "resourceflavors", "workloads"):
            if cluster.kubectl("get", "crd", f"{plural}.{KUEUE}").returncode != 0:
                cluster.kubectl("create", "-f", str(_CRDS / f"{KUEUE}_{plural}.yaml"), timeout=60)
    yield client.CustomObjectsApi(cluster.api)


@pytest.fixture
def cluster_scoped(objects: client.CustomObjectsApi) -> Iterator[list[tuple[str, str]]]:
    """(plural, name) of cluster-scoped objects a test created; deleted afterwards."""
    created: list[tuple[str, str]] = []
    yield created
    for plural, name in created:
        try:
            objects.delete_cluster_custom_object(KUEUE, "v1beta2", plural, name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def kueue_object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": kind, "metadata": {"name": name}, "spec": spec}


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_NUMBERS)}"


def rejected(call: Any) -> tuple[str, list[dict[str, Any]]]:
    """The message and causes of the 422 ``call()`` must answer."""
    with pytest.raises(client.ApiException) as raised:
        call()
    assert raised.value.status == 422, raised.value.body
    status = status_of(raised.value)
    assert status["reason"] == "Invalid"
    return status["message"], status["details"]["causes"]


def rejected_cluster_patch(
    objects: client.CustomObjectsApi, plural: str, name: str, patch: dict[str, Any]
) -> list[tuple[str, str]]:
    """(field, message) of each cause of the 422 a merge patch of a cluster-scoped Kueue object answers."""
    _, causes = rejected(lambda: objects.patch_cluster_custom_object(KUEUE, "v1beta2", plural, name, patch))
    return [(cause["field"], cause["message"]) for cause in causes]


def test_provisioning_request_class_is_immutable(cluster, namespace):
    objects = client.CustomObjectsApi(cluster.api)
    require_version(cluster, 25, "x-kubernetes-validations (CEL)")
    args = ("autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests")
    objects.create_namespaced_custom_object(*args, provisioning_request("pr1"))
    message, causes = rejected(
        lambda: objects.patch_namespaced_custom_object(
            *args, "pr1", {"spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}}
        )
    )
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.provisioningClassName",
            "message": 'Invalid value: "best-effort-atomic-scale-up.autoscaling.x-k8s.io": Value is immutable',
        }
    ]
    assert message.endswith(f"spec.provisioningClassName: {causes[0]['message']}")


def test_local_queue_cluster_queue_is_immutable_but_other_fields_change(objects, namespace):
    args = (KUEUE, "v1beta2", namespace, "localqueues")
    objects.create_namespaced_custom_object(*args, kueue_object("LocalQueue", "lq", {"clusterQueue": "cq-a"}))
    _, causes = rejected(lambda: objects.patch_namespaced_custom_object(*args, "lq", {"spec": {"clusterQueue": "b"}}))
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.clusterQueue", 'Invalid value: "b": field is immutable')
    ]
    changed = objects.patch_namespaced_custom_object(*args, "lq", {"spec": {"stopPolicy": "Hold"}})
    assert changed["spec"] == {"clusterQueue": "cq-a", "stopPolicy": "Hold"}


def test_admission_check_controller_name_is_immutable(objects, cluster_scoped):
    name = unique("ac")
    body = kueue_object("AdmissionCheck", name, {"controllerName": "kueue.x-k8s.io/provisioning-request"})
    objects.create_cluster_custom_object(KUEUE, "v1beta2", "admissionchecks", body)
    cluster_scoped.append(("admissionchecks", name))
    patch = {"spec": {"controllerName": "example.com/other"}}
    assert rejected_cluster_patch(objects, "admissionchecks", name, patch) == [
        ("spec.controllerName", 'Invalid value: "example.com/other": field is immutable')
    ]


def _cluster_queue(name: str, resources: list[dict[str, Any]], covered: list[str]) -> dict[str, Any]:
    groups = [{"coveredResources": covered, "flavors": [{"name": "default", "resources": resources}]}]
    return kueue_object("ClusterQueue", name, {"namespaceSelector": {}, "resourceGroups": groups})


def test_cluster_queue_rules_on_spec_and_inside_resource_groups(objects, cluster_scoped):
    borrowing = _cluster_queue(unique("cq"), [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "1"}], ["cpu"])
    _, causes = rejected(lambda: objects.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", borrowing))
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec", "Invalid value: borrowingLimit must be nil when cohort is empty")
    ]
    uneven = _cluster_queue(unique("cq"), [{"name": "cpu", "nominalQuota": "4"}], ["cpu", "memory"])
    _, causes = rejected(lambda: objects.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", uneven))
    assert [(c["field"], c["message"]) for c in causes] == [
        (
            "spec.resourceGroups[0]",
            "Invalid value: flavors must have the same number of resources as the coveredResources",
        )
    ]
    fine = _cluster_queue(unique("cq"), [{"name": "cpu", "nominalQuota": "4"}], ["cpu"])
    objects.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", fine)
    cluster_scoped.append(("clusterqueues", fine["metadata"]["name"]))


def test_resource_flavor_toleration_rule_and_topology_transition_rule(objects, cluster_scoped):
    name = unique("rf")
    body = kueue_object("ResourceFlavor", name, {"tolerations": [{"operator": "Equal", "value": "x"}]})
    _, causes = rejected(lambda: objects.create_cluster_custom_object(KUEUE, "v1beta2", "resourceflavors", body))
    assert (
        "spec.tolerations",
        "Invalid value: operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ) in [(c["field"], c["message"]) for c in causes]
    body["spec"] = {"nodeLabels": {"pool": "a"}, "topologyName": "default"}
    objects.create_cluster_custom_object(KUEUE, "v1beta2", "resourceflavors", body)
    cluster_scoped.append(("resourceflavors", name))
    assert rejected_cluster_patch(objects, "resourceflavors", name, {"spec": {"topologyName": "other"}}) == [
        ("spec", "Invalid value: topologyName is immutable when topologyName is set")
    ]


def _workload(pod_set: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}
    pod_sets = [{"name": "main", "template": template, **pod_set}]
    return kueue_object("Workload", "wl", {"queueName": "lq", "podSets": pod_sets, **spec})


def test_workload_rules_in_pod_sets_and_on_spec(objects, namespace):
    args = (KUEUE, "v1beta2", namespace, "workloads")
    _, causes = rejected(lambda: objects.create_namespaced_custom_object(*args, _workload({"count": 2, "minCount": 3})))
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.podSets[0]", "Invalid value: minCount should be positive and less or equal to count")
    ]
    reference = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    _, causes = rejected(
        lambda: objects.create_namespaced_custom_object(*args, _workload({"count": 2}, priorityClassRef=reference))
    )
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec", "Invalid value: priority should not be nil when priorityClassRef is set")
    ]
    created = objects.create_namespaced_custom_object(
        *args, _workload({"count": 2}, priorityClassRef=reference, priority=5)
    )
    assert created["spec"]["priority"] == 5


def test_a_wrong_typed_field_stops_rule_evaluation_with_one_cause(objects, cluster_scoped):
    body = _cluster_queue(unique("cq"), [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "1"}], ["cpu"])
    body["spec"]["preemption"] = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
    body["spec"]["stopPolicy"] = 7
    _, causes = rejected(lambda: objects.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", body))
    assert {c["field"] for c in causes} == {"spec.stopPolicy", "<nil>"}  # no rule's cause (two rules fail here)
    assert causes[-1]["message"] == (
        "Invalid value: null: some validation rules were not checked because the object was invalid; "
        "correct the existing errors to complete validation"
    )
