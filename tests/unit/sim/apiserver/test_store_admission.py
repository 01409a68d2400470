"""The store's admission of built-in kinds: pod binding, scheduling gates, phases, QoS and default
tolerations; suspended Jobs; PodTemplate and Secret defaults."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.crds import install_bundled_crds
from tests.builders import pod, provisioning_request

CM = "v1/configmaps"
PODS = "v1/pods"
PRS = "autoscaling.x-k8s.io/v1/provisioningrequests"


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
