"""Deterministic names: DNS-safe, bounded, distinct per attempt."""

from __future__ import annotations

import random
import string

import pytest

from airflow_provider_gang.reservation import naming

LONG_RUN = "scheduled__2026-11-29T00:00:00+00:00" * 3

GANG_CASES = [
    ("plain", ("train_llm", "fit", "manual__1"), {}, "train-llm-fit-t1-"),
    ("attempt-in-name", ("d", "t", "r"), {"attempt": 3}, "d-t-t3-"),
    ("map-index", ("d", "t", "r"), {"map_index": 7, "attempt": 2}, "d-t-m7-t2-"),
    ("digits-get-a-letter", ("2026_report", "x", "r"), {}, "g-2026-report-x-t1-"),
    ("nothing-readable", ("__", "..", "r"), {}, "g-t1-"),
    ("upper-and-dots", ("Team.DAG", "Task.Group.Fit", "r"), {}, "team-dag-task-group-fit-t1-"),
]


@pytest.mark.parametrize(("parts", "options", "prefix"), [c[1:] for c in GANG_CASES], ids=[c[0] for c in GANG_CASES])
def test_gang_name(parts, options, prefix):
    name = naming.gang_name(*parts, **options)
    assert name.startswith(prefix)
    assert naming.is_dns_1035_label(name) and len(name) <= naming.GANG_NAME_MAX
    assert name == naming.gang_name(*parts, **options)


def test_long_inputs_are_truncated_but_stay_distinct():
    first = naming.gang_name("d" * 80, "t" * 80, LONG_RUN, attempt=1)
    second = naming.gang_name("d" * 80, "t" * 80, LONG_RUN + "x", attempt=1)
    assert len(first) == naming.GANG_NAME_MAX and first != second
    assert naming.is_dns_label(naming.GangNames(first).member(99999))


def test_every_input_changes_the_name():
    base = dict(dag_id="d", task_id="t", run_id="r", map_index=-1, attempt=1)
    names = {
        naming.gang_name(**{**base, key: value})
        for key, value in [
            ("dag_id", "d2"),
            ("task_id", "t2"),
            ("run_id", "r2"),
            ("map_index", 0),
            ("attempt", 2),
            ("dag_id", "d"),
        ]
    }
    assert len(names) == 6


def test_attempt_must_be_positive():
    with pytest.raises(ValueError, match="attempt"):
        naming.gang_name("d", "t", "r", attempt=0)


PREDICATES = [
    ("dns-label", naming.is_dns_label, {"a": True, "a-1": True, "-a": False, "A": False, "a" * 64: False, "1a": True}),
    ("dns-1035", naming.is_dns_1035_label, {"a1": True, "1a": False, "a-": False}),
    ("subdomain", naming.is_dns_subdomain, {"a.b": True, "a..b": False, "a" * 254: False}),
    ("label-value", naming.is_label_value, {"": True, "A_b.c-1": True, "-a": False, "a" * 64: False}),
    (
        "qualified-name",
        naming.is_qualified_name,
        {"app": True, "example.com/app": True, "Bad Domain/app": False, "a/" + "b" * 64: False, "/x": False},
    ),
]


@pytest.mark.parametrize(("predicate", "cases"), [c[1:] for c in PREDICATES], ids=[c[0] for c in PREDICATES])
def test_predicates(predicate, cases):
    assert {text: predicate(text) for text in cases} == cases


LABEL_VALUES = [
    ("valid-unchanged", "manual__2026", "manual__2026"),
    ("invalid-chars-hashed", "scheduled__2026-11-29T00:00:00+00:00", None),
    ("too-long-hashed", "a" * 70, None),
    ("only-invalid-chars", "+++", naming.short_hash("+++")),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in LABEL_VALUES], ids=[c[0] for c in LABEL_VALUES])
def test_label_value(text, expected):
    value = naming.label_value(text)
    assert naming.is_label_value(value)
    if expected is not None:
        assert value == expected
    else:
        assert value.endswith(naming.short_hash(text)) and value != naming.label_value(text + "x")


def test_to_dns_label():
    assert naming.to_dns_label("My__Task..Group-", max_length=10) == "my-task-gr"
    assert naming.to_dns_label("abc-def", max_length=4) == "abc"


def test_run_labels():
    labels = naming.run_labels("dag", "task", LONG_RUN, map_index=2, attempt=3)
    assert labels["airflow-gang.io/try-number"] == "3" and labels["airflow-gang.io/map-index"] == "2"
    assert all(naming.is_qualified_name(key) and naming.is_label_value(value) for key, value in labels.items())
    assert "airflow-gang.io/map-index" not in naming.run_labels("dag", "task", "r")


def test_gang_names():
    names = naming.GangNames("g-t1-abc")
    assert {names.owner, names.pod_template, names.provisioning_request, names.job, names.pod_group, names.service} == {
        "g-t1-abc"
    }
    assert names.member(3) == "g-t1-abc-3"
    assert names.scheduling_gate == "airflow-gang.io/g-t1-abc" and naming.is_qualified_name(names.scheduling_gate)


def test_gang_name_is_valid_for_arbitrary_inputs():
    rng = random.Random(20261129)
    alphabet = string.printable + "äß漢字-_.:+"
    for _ in range(500):
        parts = ["".join(rng.choices(alphabet, k=rng.randint(0, 120))) for _ in range(3)]
        name = naming.gang_name(*parts, map_index=rng.randint(-1, 5000), attempt=rng.randint(1, 99))
        assert naming.is_dns_1035_label(name) and len(name) <= naming.GANG_NAME_MAX, (parts, name)
        value = naming.label_value(parts[2])
        assert naming.is_label_value(value), (parts[2], value)


@pytest.mark.parametrize(
    ("dag_id", "task_id", "readable"),
    [("nightly", "train", "nightly-train"), ("+++", "***", "gang"), ("d" * 80, "t", "d" * (63 - len("-tries-") - 8))],
    ids=["readable", "nothing-readable", "long"],
)
def test_try_history_name_is_a_dns_label_of_the_task_instance(dag_id: str, task_id: str, readable: str) -> None:
    name = naming.try_history_name(dag_id, "run-1", task_id, 2)
    assert naming.is_dns_label(name) and name.startswith(f"{readable}-tries-")
    assert name != naming.try_history_name(dag_id, "run-1", task_id, 3)
