"""Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.patches import json_patch, merge_patch, strategic_merge_patch


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}, {"a": 1, "b": {"d": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": 1}, {"a": None}, {}),
        ({"a": {"b": 1}}, {"a": "x"}, {"a": "x"}),
    ],
)
def test_merge_patch_rfc7386(target, patch, expected):
    assert merge_patch(target, patch) == expected


def test_merge_patch_does_not_modify_its_input():
    target = {"a": {"b": 1}}
    merge_patch(target, {"a": {"b": 2}})
    assert target == {"a": {"b": 1}}


def test_json_patch_operations():
    document = {"spec": {"items": [1, 2]}, "metadata": {"labels": {"a": "b"}}}
    result = json_patch(
        document,
        [
            {"op": "add", "path": "/spec/items/-", "value": 3},
            {"op": "replace", "path": "/spec/items/0", "value": 0},
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "copy", "from": "/spec/items", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
            {"op": "add", "path": "/metadata/labels/x~1y", "value": "z"},
            {"op": "test", "path": "/spec/items/2", "value": 3},
        ],
    )
    assert result == {"spec": {"items": [0, 2, 3], "moved": [0, 2, 3]}, "metadata": {"labels": {"x/y": "z"}}}


@pytest.mark.parametrize(
    ("operations", "code"),
    [
        ({"op": "add"}, 400),
        ([{"op": "remove", "path": "/missing"}], 422),
        ([{"op": "test", "path": "/a", "value": 2}], 422),
        ([{"op": "frobnicate", "path": "/a"}], 400),
        ([{"op": "replace", "path": "/nope/deeper", "value": 1}], 422),
    ],
)
def test_json_patch_errors(operations, code):
    with pytest.raises(errors.ApiError) as raised:
        json_patch({"a": 1}, operations)
    assert raised.value.code == code


def test_strategic_merge_patch_merges_named_lists_and_applies_directives():
    pod = {
        "metadata": {"finalizers": ["a"]},
        "spec": {
            "containers": [
                {"name": "main", "image": "x:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "y"},
            ],
            "tolerations": [{"key": "k"}],
        },
    }
    patch = {
        "metadata": {"finalizers": ["b"]},
        "spec": {
            "containers": [
                {"name": "main", "env": [{"name": "B", "value": "2"}]},
                {"name": "side", "$patch": "delete"},
            ],
            "tolerations": [{"key": "other"}],
            "$setElementOrder/containers": [{"name": "main"}],
        },
    }
    result = strategic_merge_patch(pod, patch)
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert result["spec"]["containers"] == [
        {"name": "main", "image": "x:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    ]
    assert result["spec"]["tolerations"] == [{"key": "other"}]


def test_strategic_merge_patch_replace_directive_and_primitive_deletion():
    result = strategic_merge_patch(
        {"spec": {"nodeSelector": {"a": "1", "b": "2"}}, "metadata": {"finalizers": ["x", "y"]}},
        {
            "spec": {"nodeSelector": {"$patch": "replace", "c": "3"}},
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]},
        },
    )
    assert result == {"spec": {"nodeSelector": {"c": "3"}}, "metadata": {"finalizers": ["y"]}}
