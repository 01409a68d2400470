"""Pod template shapes, files and YAML."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import template
from airflow_provider_gang.reservation.errors import GangSpecError

CONTAINERS = [{"name": "w", "image": "i"}]

SHAPES = [
    (
        "pod",
        {
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": {"a": "1"}, "ownerReferences": []},
            "spec": {"containers": CONTAINERS},
            "status": {},
        },
        {"metadata": {"annotations": {"a": "1"}}, "spec": {"containers": CONTAINERS}},
    ),
    (
        "pod-template",
        {"kind": "PodTemplate", "template": {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": CONTAINERS}}},
        {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": CONTAINERS}},
    ),
    ("pod-template-spec", {"spec": {"containers": CONTAINERS}}, {"metadata": {}, "spec": {"containers": CONTAINERS}}),
    ("pod-spec", {"containers": CONTAINERS}, {"metadata": {}, "spec": {"containers": CONTAINERS}}),
    (
        "null-metadata",
        {"metadata": None, "spec": {"containers": CONTAINERS}},
        {"metadata": {}, "spec": {"containers": CONTAINERS}},
    ),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in SHAPES], ids=[c[0] for c in SHAPES])
def test_to_pod_template_spec(value, expected):
    assert template.to_pod_template_spec(value) == expected


BAD_SHAPES = [
    ("not-a-dict", "pod", "pod_template", "must be a dict"),
    ("pod-template-without-template", {"kind": "PodTemplate"}, "pod_template.template", "needs a 'template'"),
    ("other-kind", {"kind": "Deployment", "spec": {}}, "pod_template.kind", "not a pod template"),
    ("no-spec", {"metadata": {}}, "pod_template.spec", "missing"),
    (
        "metadata-not-mapping",
        {"metadata": ["x"], "spec": {"containers": CONTAINERS}},
        "pod_template.metadata",
        "mapping",
    ),
]


@pytest.mark.parametrize(("value", "field", "fragment"), [c[1:] for c in BAD_SHAPES], ids=[c[0] for c in BAD_SHAPES])
def test_bad_shapes(value, field, fragment):
    with pytest.raises(GangSpecError) as caught:
        template.to_pod_template_spec(value)
    assert caught.value.field == field and fragment in caught.value.message


def test_normalising_copies():
    value = {"spec": {"containers": [{"name": "w", "image": "i"}]}}
    result = template.to_pod_template_spec(value)
    result["spec"]["containers"][0]["image"] = "changed"
    assert value["spec"]["containers"][0]["image"] == "i"


def test_load_pod_template_file(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: w\n    image: i\n"
    )
    assert template.load_pod_template_file(path) == {"metadata": {}, "spec": {"containers": CONTAINERS}}


FILE_ERRORS = [
    ("missing-file", None, "cannot read"),
    ("invalid-yaml", "spec: [unclosed", "not valid YAML"),
    ("not-a-mapping", "- a\n- b\n", "must contain a YAML mapping"),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in FILE_ERRORS], ids=[c[0] for c in FILE_ERRORS])
def test_pod_template_file_errors(tmp_path, text, fragment):
    path = tmp_path / "pod.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(GangSpecError) as caught:
        template.load_pod_template_file(path)
    assert caught.value.field == "pod_template_file" and fragment in caught.value.message


def test_check_rejects_unnormalised_template():
    with pytest.raises(GangSpecError, match="normalise it"):
        template.check_pod_template({"containers": CONTAINERS}, gpu_resource="nvidia.com/gpu", gpus=0)


GPU_CASES = [
    ("none", {}, 0),
    ("limit", {"limits": {"nvidia.com/gpu": "2"}}, 2),
    ("request-only", {"requests": {"nvidia.com/gpu": 4}}, 4),
    ("other-vendor", {"limits": {"amd.com/gpu": "1"}}, 0),
]


@pytest.mark.parametrize(("resources", "expected"), [c[1:] for c in GPU_CASES], ids=[c[0] for c in GPU_CASES])
def test_container_gpus(resources, expected):
    value = {"spec": {"containers": [{"name": "w", "image": "i", "resources": resources}]}}
    assert template.container_gpus(value, "nvidia.com/gpu") == expected


@pytest.mark.parametrize(
    ("resources", "field", "fragment"),
    [
        pytest.param("{{ params.resources }}", "resources", "must be a mapping of requests and limits", id="string"),
        pytest.param({"limits": ["cpu"]}, "resources.limits", "must map resource names to quantities", id="list"),
    ],
)
def test_resources_of_the_wrong_shape_are_named(resources, field, fragment):
    value = {"spec": {"containers": [{"name": "w", "image": "i", "resources": resources}]}}
    with pytest.raises(GangSpecError) as caught:
        template.check_pod_template(value, gpu_resource="nvidia.com/gpu", gpus=0)
    assert caught.value.field == f"pod_template.spec.containers[0].{field}" and fragment in caught.value.message
