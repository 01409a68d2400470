"""What a run trigger of a large gang costs per event: one pod watch whatever the size, and a shape
check only of the objects that changed since the previous view."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.reservation import shape
from airflow_provider_gang.triggers import observation
from airflow_provider_gang.triggers.gang_run import GangRunTrigger
from airflow_provider_gang.triggers.observation import GangObjects

SELECTOR = "airflow-gang.io/gang=g"


def member(rank: int, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"g-{rank}", "namespace": "default", "labels": {"airflow-gang.io/rank": str(rank)}},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", **status},
    }


@pytest.mark.parametrize("size", [8, 256])
def test_a_run_trigger_watches_its_members_with_one_label_selector_whatever_its_size(size):
    trigger = GangRunTrigger(
        connection={"in_cluster": True},
        gang_name="g",
        namespace="default",
        deadline=1e10,
        mode="provisioning_request",
        size=size,
        started_at=0.0,
        pod_selector=SELECTOR,
        provisioning_request="g",
    )
    assert trigger.objects.watches() == [
        {"resource": PROVISIONING_REQUESTS.key, "field_selector": "metadata.name=g"},
        {"resource": PODS.key, "label_selector": SELECTOR},
    ]


@pytest.fixture
def checks(monkeypatch):
    """Every object ``GangObjects.malformed`` hands to ``reservation.shape``, by name."""
    seen: list[str] = []
    check = shape.malformed

    def counted(kind: str, obj: Any) -> str | None:
        seen.append(str(obj["metadata"]["name"]))
        return check(kind, obj)

    monkeypatch.setattr(observation.shape, "malformed", counted)
    return seen


def test_only_objects_that_changed_since_the_last_view_are_checked_again(checks):
    objects = GangObjects(pod_selector=SELECTOR)
    pods = {f"g-{rank}": member(rank) for rank in range(256)}
    assert objects.malformed({PODS.key: dict(pods)}) is None
    assert len(checks) == 256
    checks.clear()
    pods["g-7"] = member(7, startTime="2026-01-01T00:00:00Z")
    assert objects.malformed({PODS.key: dict(pods)}) is None
    assert checks == ["g-7"]


def test_a_malformed_object_replacing_a_good_one_is_found_among_unchanged_ones(checks):
    objects = GangObjects(pod_selector=SELECTOR)
    pods = {f"g-{rank}": member(rank) for rank in range(64)}
    assert objects.malformed({PODS.key: dict(pods)}) is None
    pods["g-40"] = member(40, containerStatuses={"state": {}})
    assert objects.malformed({PODS.key: dict(pods)}) == (
        "Pod default/g-40: status.containerStatuses is an object, not a list"
    )


def test_an_equal_copy_is_checked_again_so_a_relisted_answer_is_never_trusted_unseen(checks):
    objects = GangObjects(pod_selector=SELECTOR)
    pods = {f"g-{rank}": member(rank) for rank in range(4)}
    objects.malformed({PODS.key: pods})
    checks.clear()
    assert objects.malformed({PODS.key: copy.deepcopy(pods)}) is None
    assert sorted(checks) == sorted(pods)
