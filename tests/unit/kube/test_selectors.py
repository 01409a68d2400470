"""Client-side selectors (``kube.selectors``) match exactly as the emulator's server-side ones do, on
seeded random labels and selectors, and say which shared watch scope covers them."""

from __future__ import annotations

import random

import pytest

from airflow_provider_gang.kube.selectors import Selector, Unsupported, parse_labels
from gang_sim.apiserver.selectors import parse_label_selector

KEYS = ("airflow-gang.io/gang", "role", "team", "example.com/x")
VALUES = ("a", "b", "member", "")


def random_selector(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 3)):
        key, value = rng.choice(KEYS), rng.choice(VALUES[:3])
        form = rng.choice(("=", "==", "!=", "exists", "!exists", "in", "notin"))
        if form in ("=", "==", "!="):
            parts.append(f"{key}{form}{value}")
        elif form == "exists":
            parts.append(key)
        elif form == "!exists":
            parts.append(f"!{key}")
        else:
            parts.append(f"{key} {form} ({value}, {rng.choice(VALUES[:3])})")
    return ",".join(parts)


def random_labels(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(VALUES) for key in KEYS if rng.random() < 0.5}


@pytest.mark.parametrize("seed", range(4))
def test_label_selectors_match_as_the_server_does(seed):
    rng = random.Random(seed)
    for _ in range(500):
        selector, labels = random_selector(rng), random_labels(rng)
        expected = all(requirement.matches(labels) for requirement in parse_label_selector(selector))
        obj = {"metadata": {"name": "x", "labels": labels}}
        assert Selector.parse(selector).matches(obj) is expected, (selector, labels)
        scope = Selector.parse(selector).scope()
        if expected and scope:  # the shared watch's scope never hides a matching object
            assert scope in labels, (selector, scope, labels)


@pytest.mark.parametrize(
    ("label_selector", "field_selector", "name", "equality", "scope"),
    [
        pytest.param(
            "airflow-gang.io/gang=g1,role=member",
            "",
            None,
            ("airflow-gang.io/gang", "g1"),
            "airflow-gang.io/gang",
            id="member-pods",
        ),
        pytest.param("", "metadata.name=pr-1", "pr-1", None, "", id="by-name"),
        pytest.param(
            "kueue.x-k8s.io/job-uid==u1",
            "",
            None,
            ("kueue.x-k8s.io/job-uid", "u1"),
            "kueue.x-k8s.io/job-uid",
            id="double-equals",
        ),
        pytest.param("!team,role in (a,b)", "", None, None, "role", id="set-without-equality"),
        pytest.param("team!=a", "metadata.namespace=default", None, None, "", id="negative-only"),
    ],
)
def test_what_a_selector_is_indexed_and_shared_by(label_selector, field_selector, name, equality, scope):
    selector = Selector.parse(label_selector, field_selector)
    assert (selector.name, selector.equality(), selector.scope()) == (name, equality, scope)


@pytest.mark.parametrize(
    ("label_selector", "field_selector"),
    [
        pytest.param("", "status.phase=Running", id="other-field"),
        pytest.param("", "metadata.name!=x", id="negated-name"),
        pytest.param("", "metadata.name=a,metadata.name=b", id="two-names"),
        pytest.param("a b", "", id="bad-label-syntax"),
    ],
)
def test_selectors_not_evaluated_here_say_so(label_selector, field_selector):
    with pytest.raises(Unsupported):
        Selector.parse(label_selector, field_selector)


def test_an_empty_selector_matches_everything():
    assert parse_labels("") == () and Selector.parse().matches({"metadata": {"name": "x"}})
