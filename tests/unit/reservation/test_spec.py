"""GangSpec validation: every rejected case names the field and says how to fix it."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from airflow_provider_gang.reservation.errors import GangSpecError
from airflow_provider_gang.reservation.spec import Distributed, GangSpec, MemberResources, ReservationMode
from tests.builders import gang_spec, template

QUEUED = "queued-provisioning.gke.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"

INVALID = [
    ("name-upper-case", {"name": "Gang"}, "name", "DNS-1035"),
    ("name-starts-with-digit", {"name": "1gang"}, "name", "starting with a letter"),
    ("name-not-a-string", {"name": 7}, "name", "DNS-1035"),
    ("name-too-long-for-member-suffix", {"name": "g" * 55}, "name", "longer than 50"),
    ("namespace-invalid", {"namespace": "ML_team"}, "namespace", "DNS-1123"),
    ("size-zero", {"size": 0}, "size", ">= 1"),
    ("size-bool", {"size": True}, "size", ">= 1"),
    ("size-float", {"size": 2.0}, "size", ">= 1"),
    ("min-size-zero", {"min_size": 0}, "min_size", ">= 1"),
    ("min-size-above-size", {"min_size": 5}, "min_size", "larger than size=4"),
    ("original-size-below-size", {"original_size": 2}, "original_size", ">= size=4"),
    ("gpus-negative", {"resources": MemberResources(gpus=-1)}, "gpus", ">= 0"),
    (
        "gpus-without-gpu-resource",
        {"resources": MemberResources(gpus=2, gpu_resource="gpu")},
        "gpu_resource",
        "not a GPU resource name",
    ),
    (
        "gpu-resource-kubernetes-io",
        {"resources": MemberResources(gpus=1, gpu_resource="kubernetes.io/gpu")},
        "gpu_resource",
        "'nvidia.com/gpu'",
    ),
    (
        "gpu-resource-sub-kubernetes-io",
        {"resources": MemberResources(gpus=1, gpu_resource="x.kubernetes.io/gpu")},
        "gpu_resource",
        "vendor resource",
    ),
    ("gpu-resource-not-string", {"resources": MemberResources(gpus=1, gpu_resource=3)}, "gpu_resource", "GPU"),
    ("cpu-bad-quantity", {"resources": MemberResources(cpu="4 cores")}, "cpu", "not a quantity"),
    ("memory-bad-suffix", {"resources": MemberResources(memory="16GB")}, "memory", "unknown suffix"),
    ("memory-zero", {"resources": MemberResources(memory="0")}, "memory", "must be positive"),
    (
        "gpus-set-twice",
        {"pod_template": template(), "resources": MemberResources(gpus=1)}
        | {
            "pod_template": {
                "spec": {"containers": [{"name": "w", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
            }
        },
        "gpus",
        "one place only",
    ),
    ("mode-unknown", {"mode": "slurm"}, "mode", "'provisioning_request', 'kueue', 'gates'"),
    ("distributed-unknown", {"distributed": "mpi"}, "distributed", "'torch', 'jax'"),
    ("class-missing", {"provisioning_class": None}, "provisioning_class", "needs a provisioning class"),
    ("class-unknown", {"provisioning_class": "fast.example.com"}, "provisioning_class", "unknown class"),
    ("parameters-not-mapping", {"provisioning_parameters": ["a"]}, "provisioning_parameters", "mapping"),
    (
        "parameters-too-many",
        {"provisioning_parameters": {f"k{i}": "v" for i in range(101)}},
        "provisioning_parameters",
        "allows 100",
    ),
    (
        "parameter-value-too-long",
        {"provisioning_parameters": {"k": "v" * 256}},
        "provisioning_parameters['k']",
        "allows 255",
    ),
    (
        "parameter-value-not-string",
        {"provisioning_parameters": {"k": 5}},
        "provisioning_parameters['k']",
        "must be strings",
    ),
    (
        "max-run-duration-wrong-class",
        {"provisioning_parameters": {"maxRunDurationSeconds": "60"}},
        "provisioning_parameters['maxRunDurationSeconds']",
        "only queued-provisioning.gke.io",
    ),
    (
        "max-run-duration-over-7-days",
        {"provisioning_class": QUEUED, "provisioning_parameters": {"maxRunDurationSeconds": "604801"}},
        "provisioning_parameters['maxRunDurationSeconds']",
        "1..604800",
    ),
    (
        "max-run-duration-not-integer",
        {"provisioning_class": QUEUED, "provisioning_parameters": {"maxRunDurationSeconds": "1h"}},
        "provisioning_parameters['maxRunDurationSeconds']",
        "whole seconds",
    ),
    (
        "no-retry-wrong-class",
        {"provisioning_class": QUEUED, "provisioning_parameters": {"noRetry": "true"}},
        "provisioning_parameters['noRetry']",
        "only check-capacity",
    ),
    (
        "no-retry-not-boolean",
        {"provisioning_parameters": {"noRetry": "yes"}},
        "provisioning_parameters['noRetry']",
        "'true' or 'false'",
    ),
    (
        "parameters-in-kueue-mode",
        {"mode": "kueue", "provisioning_parameters": {"a": "b"}},
        "provisioning_parameters",
        "remove it",
    ),
    ("kueue-without-queue", {"mode": "kueue", "queue": None}, "queue", "LocalQueue"),
    ("kueue-queue-invalid", {"mode": "kueue", "queue": "Team Queue"}, "queue", "not a valid LocalQueue"),
    ("queue-outside-kueue", {"queue": "lq"}, "queue", "only used by reservation='kueue'"),
    ("strict-zone-not-bool", {"zone": "us-a", "strict_zone": "yes"}, "strict_zone", "True or False"),
    ("spot-not-bool", {"spot": 1}, "spot", "True or False"),
    ("strict-zone-without-zone", {"strict_zone": True}, "strict_zone", "needs a zone"),
    ("zone-empty", {"zone": ""}, "zone", "zone label value"),
    ("zone-invalid", {"zone": "us central"}, "zone", "zone label value"),
    ("labels-not-mapping", {"labels": ["team"]}, "labels", "mapping"),
    ("label-key-invalid", {"labels": {"bad key": "x"}}, "labels['bad key']", "label key"),
    (
        "label-key-reserved",
        {"labels": {"airflow-gang.io/gang": "x"}},
        "labels['airflow-gang.io/gang']",
        "set by the provider",
    ),
    ("label-value-invalid", {"labels": {"team": "a b"}}, "labels['team']", "label value"),
    ("label-value-not-string", {"labels": {"team": 1}}, "labels['team']", "label value"),
    ("master-port-zero", {"master_port": 0}, "master_port", "1..65535"),
    ("master-port-bool", {"master_port": True}, "master_port", "1..65535"),
    (
        "template-no-containers",
        {"pod_template": {"spec": {"containers": []}}},
        "pod_template.spec.containers",
        "at least one container",
    ),
    (
        "template-container-no-name",
        {"pod_template": {"spec": {"containers": [{"image": "i"}]}}},
        "pod_template.spec.containers[0].name",
        "needs a name",
    ),
    (
        "template-container-no-image",
        {"pod_template": {"spec": {"containers": [{"name": "w"}]}}},
        "pod_template.spec.containers[0].image",
        "needs an image",
    ),
    (
        "template-container-not-mapping",
        {"pod_template": {"spec": {"containers": ["w"]}}},
        "pod_template.spec.containers[0].name",
        "needs a name",
    ),
    (
        "template-bad-quantity",
        {
            "pod_template": {
                "spec": {"containers": [{"name": "w", "image": "i", "resources": {"requests": {"cpu": "lots"}}}]}
            }
        },
        "pod_template.spec.containers[0].resources.requests['cpu']",
        "not a Kubernetes quantity",
    ),
    (
        "template-restart-always",
        {"pod_template": template(restartPolicy="Always")},
        "pod_template.spec.restartPolicy",
        "use 'Never'",
    ),
    ("template-node-name", {"pod_template": template(nodeName="n1")}, "pod_template.spec.nodeName", "bypasses"),
    ("reservation-name-underscore", {"reservation_name": "a100_res"}, "reservation_name", "is not a reservation name"),
    ("reservation-name-digit-first", {"reservation_name": "1-a100"}, "reservation_name", "starting with a letter"),
    ("reservation-name-too-long", {"reservation_name": "r" * 64}, "reservation_name", "<= 63 chars"),
    ("reservation-name-not-a-string", {"reservation_name": 7}, "reservation_name", "7 is not a reservation name"),
    (
        "reservation-with-spot",
        {"reservation_name": "a100-res", "spot": True},
        "reservation_name",
        "Spot VMs cannot consume",
    ),
]


@pytest.mark.parametrize(("overrides", "field", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_spec_names_field_and_fix(overrides, field, fragment):
    with pytest.raises(GangSpecError) as caught:
        gang_spec(**overrides)
    assert caught.value.field == field
    assert fragment in caught.value.message
    assert str(caught.value) == f"{field}: {caught.value.message}"


VALID = [
    ("minimal", {}),
    ("kueue-partial", {"mode": "kueue", "min_size": 2}),
    (
        "gates-queued-provisioning",
        {"mode": "gates", "provisioning_class": QUEUED, "provisioning_parameters": {"maxRunDurationSeconds": "86400"}},
    ),
    ("check-capacity-no-retry", {"provisioning_class": CHECK, "provisioning_parameters": {"noRetry": "true"}}),
    ("best-effort-atomic", {"provisioning_class": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}),
    ("zone-strict", {"zone": "us-central1-a", "strict_zone": True}),
    ("labels", {"labels": {"team": "ml", "example.com/cost-center": "42"}}),
    ("cpu-only", {"resources": MemberResources(cpu="500m", memory="1Gi")}),
    ("string-enums", {"mode": "gates", "distributed": "jax"}),
    (
        "template-gpus-without-gpus-field",
        {
            "resources": MemberResources(),
            "pod_template": {
                "spec": {"containers": [{"name": "w", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}
            },
        },
    ),
    ("template-restart-never", {"pod_template": template(restartPolicy="Never")}),
]


@pytest.mark.parametrize("overrides", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_spec_round_trips(overrides):
    spec = gang_spec(**overrides)
    assert GangSpec.from_dict(spec.to_dict()) == spec
    assert isinstance(spec.mode, ReservationMode)


def test_enums_given_as_strings_are_converted():
    spec = gang_spec(mode="gates", distributed="torch")
    assert spec.mode is ReservationMode.GATES and spec.distributed is Distributed.TORCH


def test_floor_and_size_before_shrink():
    assert gang_spec().floor == 4 and gang_spec(min_size=2).floor == 2
    assert gang_spec().size_before_shrink == 4 and gang_spec(size=2, original_size=8).size_before_shrink == 8


def test_pod_shapes_are_normalised_on_construction():
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x", "labels": {"a": "b"}, "uid": "u"},
        "spec": {"containers": [{"name": "w", "image": "i"}]},
        "status": {"phase": "Running"},
    }
    spec = gang_spec(pod_template=pod)
    assert spec.pod_template == {"metadata": {"labels": {"a": "b"}}, "spec": pod["spec"]}


def test_replace_revalidates():
    with pytest.raises(GangSpecError, match="min_size"):
        dataclasses.replace(gang_spec(min_size=3), size=2)


def test_mode_uses_provisioning_request():
    assert [mode.uses_provisioning_request for mode in ReservationMode] == [True, False, True, False]


def test_error_pickles_with_its_fields():
    error = pickle.loads(pickle.dumps(GangSpecError("size", "must be >= 1")))
    assert (error.field, error.message) == ("size", "must be >= 1")
