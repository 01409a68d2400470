"""Label and field selectors (table-driven, upstream syntax)."""

from __future__ import annotations

import pytest

from gang_sim.apiserver import errors
from gang_sim.apiserver.selectors import field_matcher, label_matcher, matches_label_selector_object

LABELS = {"app": "web", "tier": "front", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("missing!=x", True),
        ("app", True),
        ("!app", False),
        ("!missing", True),
        ("app in (db, web)", True),
        ("app notin (db,web)", False),
        ("missing notin (a)", True),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("empty=", True),
        ("app in (web),!missing,tier", True),
    ],
    ids=lambda value: str(value),
)
def test_label_selectors(selector, expected):
    assert label_matcher(selector)(LABELS) is expected


@pytest.mark.parametrize("selector", ["app in (a", "app in a", "=x", "app=a b"])
def test_malformed_label_selectors_are_400(selector):
    with pytest.raises(errors.ApiError) as raised:
        label_matcher(selector)
    assert raised.value.code == 400


POD = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p", True),
        ("metadata.name!=p", False),
        ("metadata.namespace==ns,status.phase=Running", True),
        ("spec.nodeName=n2", False),
        ("spec.nodeName!=", True),
    ],
)
def test_pod_field_selectors(selector, expected):
    assert field_matcher(selector, "/pods")(POD) is expected


def test_unsupported_fields_are_400_with_the_upstream_messages():
    with pytest.raises(errors.ApiError) as raised:
        field_matcher("status.phase=Running", "/configmaps")
    assert raised.value.code == 400 and raised.value.message.startswith('"status.phase" is not a known field selector')
    with pytest.raises(errors.ApiError) as raised:
        field_matcher("spec.hostname=x", "/pods")
    assert raised.value.message == "field label not supported: spec.hostname"


def test_structured_label_selector():
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}],
    }
    assert matches_label_selector_object(selector, LABELS)
    assert not matches_label_selector_object({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, LABELS)
    assert matches_label_selector_object({}, LABELS)
    assert not matches_label_selector_object(None, LABELS)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_ages_render_like_kubectl(seconds, shown):
    from gang_sim.apiserver.http.tables import human_duration

    assert human_duration(seconds) == shown


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (".spec.queueName", "q"),
        (".status.conditions[?(@.type=='Admitted')].status", "True"),
        (".status.conditions[*].type", "QuotaReserved,Admitted"),
        (".status.conditions[1].reason", "Ok"),
        (".status.missing", ""),
    ],
)
def test_printer_column_json_paths(path, value):
    from gang_sim.apiserver.http.tables import evaluate

    workload = {
        "spec": {"queueName": "q"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True", "reason": "Ok"},
            ]
        },
    }
    assert evaluate(workload, path) == value
