"""sim.kinds.cel_rules: where rules apply, transition rules, ratcheting, messages (upstream validation.go)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.sim.apiserver import cel_expressions as cel
from airflow_provider_gang.sim.apiserver.kinds import cel_rules


def rules(*entries: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {"x-kubernetes-validations": list(entries), **schema}


ITEM = rules(
    {"rule": "self.count >= 1", "message": "count must be positive"},
    {"rule": "self.count == oldSelf.count", "message": "count is fixed"},
    type="object",
)
SCHEMA: dict[str, Any] = rules(
    {"rule": "!has(self.spec) || self.metadata.name != 'forbidden'", "message": "name is forbidden"},
    type="object",
    properties={
        "metadata": {"type": "object"},
        "spec": rules(
            {"rule": "self.size == oldSelf.size", "message": "size is immutable"},
            {
                "rule": "!has(self.limit) || self.limit >= self.size",
                "messageExpression": "'limit ' + string(self.limit) + ' is below size ' + string(self.size)",
                "fieldPath": ".limit",
            },
            {"rule": "!has(self.owner) || self.owner != ''", "reason": "FieldValueRequired", "message": "needs one"},
            {"rule": "self.mode == 'a'", "reason": "FieldValueForbidden"},
            type="object",
            properties={
                "size": {"type": "integer"},
                "limit": {"type": "integer"},
                "ratio": rules({"rule": "self < 1.5"}, type="number"),
                "owner": {"type": "string"},
                "mode": {"type": "string"},
                "members": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": ITEM,
                },
                "labels": {"type": "object", "additionalProperties": rules({"rule": "self != 'x'"}, type="string")},
            },
        ),
    },
)


def obj(name: str = "o", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": {"mode": "a", **spec}}


def shown(causes: list[dict[str, Any]]) -> list[str]:
    return [f"{cause['field']}: {cause['message']}" for cause in causes]


def test_a_valid_object_has_no_causes_and_transition_rules_wait_for_an_update():
    assert cel_rules.rule_causes(obj(size=2, members=[{"name": "a", "count": 1}]), None, SCHEMA) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"size": 4, "limit": 2},
            ["spec.limit: Invalid value: limit 2 is below size 4"],
            id="messageExpression-and-fieldPath",
        ),
        pytest.param({"owner": ""}, ["spec: Required value: needs one"], id="reason-required"),
        pytest.param({"mode": "b"}, ["spec: Forbidden: failed rule: self.mode == 'a'"], id="reason-forbidden-default"),
        pytest.param(
            {"ratio": 2},
            ["spec.ratio: Invalid value: 2: failed rule: self < 1.5"],
            id="integer-json-in-a-number-field-is-a-double",
        ),
        pytest.param(
            {"members": [{"name": "a", "count": 0}]},
            ["spec.members[0]: Invalid value: count must be positive"],
            id="inside-array-items",
        ),
        pytest.param(
            {"labels": {"k": "x"}},
            ["spec.labels.k: Invalid value: \"x\": failed rule: self != 'x'"],
            id="inside-map-values",
        ),
        pytest.param(
            {"members": [{"name": "a"}]},
            ['spec.members[0]: Invalid value: "object": no such key: count evaluating rule: count must be positive'],
            id="runtime-error",
        ),
    ],
)
def test_failing_rules_answer_upstream_causes(spec, expected):
    assert shown(cel_rules.rule_causes(obj(**spec), None, SCHEMA)) == expected


def test_a_rule_at_the_root_sees_metadata_name_and_reports_nil():
    assert shown(cel_rules.rule_causes(obj("forbidden"), None, SCHEMA)) == ["<nil>: Invalid value: name is forbidden"]


def test_transition_rules_on_update_only_where_the_old_value_correlates():
    old = obj(size=2, members=[{"name": "a", "count": 1}])
    new = obj(size=3, members=[{"name": "a", "count": 2}, {"name": "b", "count": 5}])
    assert shown(cel_rules.rule_causes(new, old, SCHEMA)) == [
        "spec: Invalid value: size is immutable",
        "spec.members[0]: Invalid value: count is fixed",
    ]


def test_ratcheting_keeps_an_unchanged_invalid_value_but_not_a_changed_one():
    old = obj(size=1, ratio=3.0, owner="me")
    assert cel_rules.rule_causes(obj(size=1, ratio=3.0, owner="you"), old, SCHEMA) == []
    assert shown(cel_rules.rule_causes(obj(size=1, ratio=4.0), old, SCHEMA)) == [
        "spec.ratio: Invalid value: 4: failed rule: self < 1.5"
    ]


def test_an_unsupported_function_is_a_clear_error_not_a_skip():
    schema = rules({"rule": "quantity(self.q).isGreaterThan(quantity('1'))"}, type="object")
    (cause,) = cel_rules.rule_causes({"spec": {"q": "2"}}, None, {"type": "object", "properties": {"spec": schema}})
    assert cause["field"] == "spec"
    assert "undeclared reference to 'isGreaterThan'" in cause["message"]
    assert "Kubernetes CEL libraries" in cause["message"]
    with pytest.raises(cel.UnsupportedCel, match="compilation failed"):
        cel.compile_expression("self.?field")


def test_a_message_expression_that_fails_falls_back_to_the_message():
    schema = {
        "type": "object",
        "properties": {
            "spec": rules({"rule": "false", "message": "plain", "messageExpression": "self.missing"}, type="object")
        },
    }
    assert shown(cel_rules.rule_causes({"spec": {}}, None, schema)) == ["spec: Invalid value: plain"]
