"""The simulated MultiKueue's decisions on one manager Workload and its workers' copies, rule by rule
(``gang_sim.controllers.kueue.multikueue``, after Kueue v0.17.0 ``workload.go`` ``reconcileGroup``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from gang_sim.controllers.kueue import multikueue as mk

NOW = datetime(2026, 12, 5, 12, 0, 0, tzinfo=timezone.utc)
LONG_AGO = "2026-12-05T11:00:00Z"


def condition(kind: str, status: str = "True", at: str = "2026-12-05T11:59:00Z", **extra: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": extra.get("reason", kind),
        "message": extra.get("message", ""),
        "lastTransitionTime": at,
    }


def workload(
    *conditions: dict[str, Any], check: str = "Pending", since: str = "2026-12-05T11:59:00Z", **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-train-1a2b3", "namespace": "default", "labels": {"kueue.x-k8s.io/job-uid": "local"}},
        "spec": {"queueName": "team", "podSets": [{"name": "main", "count": 2}]},
        "status": {
            "conditions": list(conditions),
            "admissionChecks": [{"name": "multikueue", "state": check, "message": "", "lastTransitionTime": since}],
            **status,
        },
    }


RESERVED = condition("QuotaReserved")


def job(suspend: bool = True, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "suspend": suspend,
            "managedBy": "kueue.x-k8s.io/multikueue",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "local"}},
            "template": {
                "metadata": {
                    "labels": {
                        "batch.kubernetes.io/controller-uid": "local",
                        "batch.kubernetes.io/job-name": "train",
                        "team": "a",
                    }
                },
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
        "status": status,
    }


def copy_of(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "job-train-1a2b3", "namespace": "default"}, "status": {"conditions": list(conditions)}}


def remote_job(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "default"}, "status": status}


def group(local: dict[str, Any], local_job: dict[str, Any] | None = None, **remotes: mk.Remote) -> mk.Group:
    named = {name.replace("_", "-"): remote for name, remote in remotes.items()}
    return mk.Group(local, local_job or job(), "multikueue", named, "multikueue", NOW)


def kinds(actions: list[mk.Action]) -> list[tuple[str, ...]]:
    described: list[tuple[str, ...]] = []
    for action in actions:
        if isinstance(action, mk.RemoteCreate):
            described.append(("create", action.cluster, action.resource))
        elif isinstance(action, mk.RemoteDelete):
            described.append(("delete", action.cluster, action.resource))
        elif isinstance(action, mk.CheckState):
            described.append(("check", action.state, action.cluster_name or ""))
        else:
            described.append((type(action).__name__,))
    return described


WORKLOADS, JOBS = mk.WORKLOADS, mk.JOBS


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            group(workload(RESERVED), worker_1=mk.Remote(), worker_2=mk.Remote()),
            [("create", "worker-1", WORKLOADS), ("create", "worker-2", WORKLOADS)],
            id="copies-to-every-worker",
        ),
        pytest.param(group(workload(), worker_1=mk.Remote()), [], id="no-quota-nothing-to-copy"),
        pytest.param(
            group(workload(), worker_1=mk.Remote(copy_of(), remote_job())),
            [("delete", "worker-1", JOBS), ("delete", "worker-1", WORKLOADS)],
            id="quota-lost-copies-removed",
        ),
        pytest.param(
            group(workload(RESERVED, condition("Finished")), worker_2=mk.Remote(copy_of(condition("Finished")))),
            [("delete", "worker-2", WORKLOADS)],
            id="finished-copies-removed",
        ),
        pytest.param(
            group(
                workload(RESERVED),
                worker_1=mk.Remote(copy_of()),
                worker_2=mk.Remote(copy_of(condition("Admitted"))),
            ),
            [("delete", "worker-1", WORKLOADS), ("create", "worker-2", JOBS)],
            id="admitted-keeps-one-and-copies-the-job-first",
        ),
        pytest.param(
            group(workload(RESERVED), worker_2=mk.Remote(copy_of(condition("Admitted")), remote_job(active=2))),
            [("check", "Ready", "worker-2")],
            id="job-there-check-ready",
        ),
        pytest.param(
            group(
                workload(RESERVED, check="Ready", clusterName="worker-2"),
                job(suspend=False),
                worker_2=mk.Remote(copy_of(condition("Admitted")), remote_job(ready=2)),
            ),
            [("MirrorJobStatus",)],
            id="running-mirrored",
        ),
        pytest.param(
            group(
                workload(RESERVED, check="Ready"),
                worker_2=mk.Remote(copy_of(condition("Finished")), remote_job(succeeded=2)),
            ),
            [("MirrorJobStatus",), ("Finish",)],
            id="remote-finished",
        ),
        pytest.param(
            group(workload(RESERVED, check="Ready"), worker_2=mk.Remote(copy_of(condition("Evicted")))),
            [("check", "Retry", "")],
            id="evicted-on-worker",
        ),
        pytest.param(
            group(workload(RESERVED, check="Ready"), worker_2=mk.Remote()), [], id="reserving-remote-lost-recently"
        ),
        pytest.param(
            group(workload(RESERVED, check="Ready", since=LONG_AGO), worker_2=mk.Remote()),
            [("check", "Retry", "")],
            id="reserving-remote-lost-for-long",
        ),
        pytest.param(group(workload(RESERVED, check="Rejected"), worker_2=mk.Remote()), [], id="rejected"),
    ],
)
def test_reconcile_group(case: mk.Group, expected: list[tuple[str, ...]]) -> None:
    assert kinds(mk.reconcile_group(case)) == expected


def test_the_workers_job_is_the_managers_without_what_the_job_controller_owns() -> None:
    copied = mk.clone_job(job(), "job-train-1a2b3", "multikueue")
    assert "managedBy" not in copied["spec"] and "selector" not in copied["spec"]
    assert copied["spec"]["template"]["metadata"]["labels"] == {"batch.kubernetes.io/job-name": "train", "team": "a"}
    assert copied["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "team",
        "kueue.x-k8s.io/prebuilt-workload-name": "job-train-1a2b3",
        mk.ORIGIN_LABEL: "multikueue",
    }
    clone = mk.clone_workload(workload(RESERVED), "multikueue")
    assert clone["metadata"]["labels"][mk.ORIGIN_LABEL] == "multikueue" and "status" not in clone


def test_copies_of_gone_workloads_are_orphans() -> None:
    live = {("default", "job-train-1a2b3")}
    copies = [copy_of(), {"metadata": {"name": "job-gone", "namespace": "default"}}]
    jobs = [
        {
            "metadata": {
                "name": "train",
                "namespace": "default",
                "labels": {mk.PREBUILT_WORKLOAD_LABEL: "job-train-1a2b3"},
            }
        },
        {"metadata": {"name": "gone", "namespace": "default", "labels": {mk.PREBUILT_WORKLOAD_LABEL: "job-gone"}}},
    ]
    assert [(a.resource, a.name) for a in mk.orphans("worker-1", copies, jobs, live)] == [  # type: ignore[union-attr]
        (JOBS, "gone"),
        (WORKLOADS, "job-gone"),
    ]


@pytest.mark.parametrize(
    ("configured", "clusters", "expected"),
    [
        pytest.param(None, {}, ("False", "BadConfig"), id="no-config"),
        pytest.param(["a"], {"a": {"status": {"conditions": [condition("Active")]}}}, ("True", "Active"), id="active"),
        pytest.param(
            ["a", "b"],
            {"a": {"status": {"conditions": [condition("Active")]}}},
            ("True", "SomeActiveClusters"),
            id="some",
        ),
        pytest.param(
            ["a"],
            {"a": {"status": {"conditions": [condition("Active", "False")]}}},
            ("False", "NoUsableClusters"),
            id="none",
        ),
    ],
)
def test_check_activity(configured: list[str] | None, clusters: dict[str, Any], expected: tuple[str, str]) -> None:
    assert mk.check_activity(configured, clusters)[:2] == expected


def test_config_name_and_clusters() -> None:
    check = {"spec": {"parameters": {"kind": "MultiKueueConfig", "name": "multikueue"}}}
    assert mk.config_name(check) == "multikueue"
    assert mk.config_name({"spec": {"parameters": {"kind": "ProvisioningRequestConfig", "name": "x"}}}) is None
    assert mk.config_clusters({"spec": {"clusters": ["worker-1"]}}) == ["worker-1"]
    assert mk.config_clusters(None) is None
