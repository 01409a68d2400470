"""MultiKueue as the provider reads it: the dispatching check of a ClusterQueue, the worker of an
admitted Workload, the connections mapping, and a run judged by the manager's mirrored Job status."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import decision, job_status, manifests, multikueue, shape
from airflow_provider_gang.reservation.observed import Observed, Stage
from airflow_provider_gang.reservation.phases import Phase, Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from tests.builders import T0, gang_spec, member
from tests.builders import workload as wl
from tests.unit.reservation.observations import NO_LIMIT, reservation_stage

MULTIKUEUE_CHECK = {"metadata": {"name": "multikueue"}, "spec": {"controllerName": multikueue.CONTROLLER}}
PROVISIONING_CHECK = {"metadata": {"name": "dws"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}


def cluster_queue(*checks: str, v1beta1: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"admissionChecksStrategy": {"admissionChecks": [{"name": name} for name in checks]}}
    if v1beta1:
        spec["admissionChecks"] = list(v1beta1)
    return {"spec": spec}


@pytest.mark.parametrize(
    ("queue", "checks", "expected"),
    [
        pytest.param(cluster_queue("multikueue"), {"multikueue": MULTIKUEUE_CHECK}, "multikueue", id="multikueue"),
        pytest.param(
            cluster_queue("dws", "multikueue"),
            {"dws": PROVISIONING_CHECK, "multikueue": MULTIKUEUE_CHECK},
            "multikueue",
            id="after-another-check",
        ),
        pytest.param(cluster_queue("dws"), {"dws": PROVISIONING_CHECK}, None, id="provisioning-only"),
        pytest.param(cluster_queue(), {}, None, id="no-checks"),
        pytest.param(cluster_queue("gone"), {}, None, id="check-missing"),
        pytest.param(
            cluster_queue(v1beta1=("multikueue",)), {"multikueue": MULTIKUEUE_CHECK}, "multikueue", id="v1beta1"
        ),
        pytest.param(None, {}, None, id="no-cluster-queue"),
    ],
)
def test_the_dispatching_check_is_the_queues_multikueue_admission_check(
    queue: dict[str, Any] | None, checks: dict[str, Any], expected: str | None
) -> None:
    assert multikueue.dispatching_check(queue, checks) == expected


def test_admission_check_names_ignore_malformed_entries_and_repeat_none() -> None:
    queue = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, "b", {"name": 3}]}}}
    queue["spec"]["admissionChecks"] = ["a", 4, "c"]
    assert multikueue.admission_check_names(queue) == ["a", "c"]


def test_the_worker_is_the_admitted_workloads_cluster_name() -> None:
    admitted = wl(2).admitted().check("multikueue", "Ready", 'The workload got reservation on "worker-2"').obj()
    assert multikueue.worker_cluster(admitted) is None
    admitted["status"]["clusterName"] = "worker-2"
    assert multikueue.worker_cluster(admitted) == "worker-2"
    assert multikueue.worker_cluster(None) is None


def test_a_reservation_granted_by_a_worker_names_it() -> None:
    admitted = wl(3).admitted().check("multikueue", "Ready").obj()
    admitted["status"]["clusterName"] = "worker-2"
    granted = decision.decide(reservation_stage("kueue", workload=admitted), now=T0, policy=NO_LIMIT)
    assert (granted.phase, granted.reason) == (Phase.RESERVED, Reason.RESERVED)
    assert "by MultiKueue worker cluster 'worker-2'" in granted.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, {}, id="none"),
        pytest.param("", {}, id="empty-option"),
        pytest.param({"worker-1": "kube_worker1"}, {"worker-1": "kube_worker1"}, id="mapping"),
        pytest.param('{"worker-2": "kube_worker2"}', {"worker-2": "kube_worker2"}, id="json-option"),
    ],
)
def test_connections_parse(value: Any, expected: dict[str, str]) -> None:
    assert multikueue.parse_connections(value) == expected


@pytest.mark.parametrize(
    ("value", "said"),
    [
        pytest.param("{not json", "is not a JSON object", id="bad-json"),
        pytest.param('["worker-1"]', "must map MultiKueueCluster names", id="json-list"),
        pytest.param({"Worker_1": "kube"}, "key 'Worker_1' is not a MultiKueueCluster name", id="bad-name"),
        pytest.param({"worker-1": ""}, "maps to '', not a connection id", id="empty-id"),
        pytest.param({"worker-1": 7}, "maps to 7", id="not-a-string"),
    ],
)
def test_bad_connections_are_refused_naming_the_entry(value: Any, said: str) -> None:
    with pytest.raises(multikueue.ConnectionsError, match=said):
        multikueue.parse_connections(value)


def test_connection_lookup_and_what_is_unmapped() -> None:
    connections = {"worker-2": "kube_worker2"}
    assert multikueue.connection_for("worker-2", connections) == "kube_worker2"
    assert multikueue.connection_for("worker-1", connections) is None
    config = {"spec": {"clusters": ["worker-1", "worker-2", 3]}}
    assert multikueue.config_clusters(config) == ["worker-1", "worker-2"]
    assert multikueue.config_clusters(None) == []
    assert multikueue.unmapped(multikueue.config_clusters(config), connections) == ["worker-1"]
    assert "no rank logs" in multikueue.not_seen_note("worker-1")


def job(**status: Any) -> dict[str, Any]:
    conditions = status.pop("conditions", [])
    return {"metadata": {"name": "gang", "namespace": "ml"}, "status": {**status, "conditions": conditions}}


def condition(kind: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


@pytest.mark.parametrize(
    ("mirrored", "phase", "reason"),
    [
        pytest.param(None, Phase.FAILED, Reason.RESERVATION_GONE, id="gone"),
        pytest.param(job(), Phase.STARTING, Reason.MEMBERS_STARTING, id="nothing-yet"),
        pytest.param(job(active=2, ready=1), Phase.STARTING, Reason.MEMBERS_STARTING, id="one-ready"),
        pytest.param(job(active=2, ready=2), Phase.RUNNING, Reason.MEMBERS_RUNNING, id="all-ready"),
        pytest.param(job(ready=1, succeeded=1), Phase.RUNNING, Reason.MEMBERS_RUNNING, id="ready-or-done"),
        pytest.param(job(succeeded=2), Phase.SUCCEEDED, Reason.ALL_SUCCEEDED, id="succeeded-count"),
        pytest.param(
            job(succeeded=1, conditions=[condition("Complete", "CompletionsReached")]),
            Phase.SUCCEEDED,
            Reason.ALL_SUCCEEDED,
            id="complete",
        ),
        pytest.param(job(active=1, failed=1), Phase.FAILED, Reason.MEMBER_FAILED, id="failed-count"),
        pytest.param(
            job(succeeded=2, conditions=[condition("FailureTarget", "BackoffLimitExceeded")]),
            Phase.FAILED,
            Reason.MEMBER_FAILED,
            id="failure-target-outranks-success",
        ),
        pytest.param(
            job(
                conditions=[condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
            ),
            Phase.FAILED,
            Reason.MEMBER_FAILED,
            id="failed",
        ),
        pytest.param(job(ready=True, succeeded="2"), Phase.STARTING, Reason.MEMBERS_STARTING, id="counts-not-ints"),
    ],
)
def test_a_run_judged_by_the_mirrored_job_status(mirrored: Any, phase: Phase, reason: Reason) -> None:
    judged = job_status.decide_by_job(mirrored, size=2)
    assert (judged.phase, judged.reason, judged.members) == (phase, reason, ())
    assert judged.terminal is (phase in (Phase.FAILED, Phase.SUCCEEDED))


def test_a_failed_job_says_why() -> None:
    failed = job(
        conditions=[condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
    )
    assert (
        "BackoffLimitExceeded: Job has reached the specified backoff limit"
        in job_status.decide_by_job(failed, size=2).message
    )
    assert "1 member pod(s) failed" in job_status.decide_by_job(job(failed=1), size=2).message


def observed_by_job(mirrored: Any, workload: Any = None) -> Observed:
    return Observed(
        mode=ReservationMode.KUEUE,
        stage=Stage.RUN,
        size=2,
        started_at=T0,
        workload=workload,
        job=mirrored,
        job_status_only=True,
        pods_from_job=True,
    )


def test_decide_runs_on_the_job_status_when_no_pod_can_be_read() -> None:
    running = decision.decide(observed_by_job(job(ready=2)), now=T0, policy=NO_LIMIT)
    assert (running.phase, running.reason) == (Phase.RUNNING, Reason.MEMBERS_RUNNING)
    evicted = decision.decide(observed_by_job(job(ready=2), wl(2).admitted().evicted().obj()), now=T0, policy=NO_LIMIT)
    assert (evicted.phase, evicted.reason, evicted.terminal) == (Phase.FAILED, Reason.EVICTED, True)


def test_the_startup_deadline_applies_to_a_run_judged_by_its_job() -> None:
    late = decision.decide(
        observed_by_job(job(ready=1)), now=T0 + 100, policy=decision.Policy(startup_deadline=T0 + 60)
    )
    assert (late.phase, late.reason) == (Phase.FAILED, Reason.DEADLINE)


def test_a_job_status_of_the_wrong_type_is_malformed() -> None:
    observed = observed_by_job(job(ready="2"))
    assert shape.malformed_in(observed) == "Job ml/gang: status.ready is a string, not an integer"
    cluster_name = wl(2).admitted().obj()
    cluster_name["status"]["clusterName"] = 2
    assert "status.clusterName is an integer" in str(shape.malformed("Workload", cluster_name))


def test_the_job_of_a_multikueue_queue_is_managed_by_multikueue() -> None:
    spec = gang_spec(mode=ReservationMode.KUEUE, size=2)
    assert "managedBy" not in manifests.kueue.job(spec, owner_uid="owner")["spec"]
    dispatched = manifests.kueue.job(spec, owner_uid="owner", multikueue=True)
    assert dispatched["spec"]["managedBy"] == multikueue.MANAGED_BY == "kueue.x-k8s.io/multikueue"
    assert dispatched["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"


def test_the_workers_rendezvous_service_is_owned_by_the_workers_job() -> None:
    spec = gang_spec(mode=ReservationMode.KUEUE, size=2, distributed="torch")
    service = manifests.service.worker_headless_service(spec, job_uid="worker-job-uid")
    (owner,) = service["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["name"]) == ("Job", "worker-job-uid", "gang-t1-abc")
    on_manager = manifests.service.headless_service(spec, owner_uid="owner")
    assert service["spec"] == on_manager["spec"]


def observed_on_worker(mirrored: Any, *pods: Any) -> Observed:
    """A run on a MultiKueue worker with a mapped connection: the worker's pods and the manager's Job."""
    return Observed(
        mode=ReservationMode.KUEUE,
        stage=Stage.RUN,
        size=2,
        started_at=T0,
        pods=[pod.obj() for pod in pods],
        job=mirrored,
        pods_from_job=True,
    )


@pytest.mark.parametrize(
    ("mirrored", "pods", "reason"),
    [
        pytest.param(job(succeeded=2), (), Reason.ALL_SUCCEEDED, id="pods-removed-before-seen-ending"),
        pytest.param(job(failed=1), (member(0).running(),), Reason.MEMBER_FAILED, id="failed-by-the-mirror"),
        pytest.param(job(ready=2), (member(0).running(), member(1).running()), Reason.MEMBERS_RUNNING, id="running"),
        pytest.param(job(succeeded=2), (member(0).succeeded(), member(1).succeeded()), Reason.ALL_SUCCEEDED, id="pods"),
        pytest.param(
            job(succeeded=2), (member(0).failed(3), member(1).succeeded()), Reason.MEMBER_FAILED, id="pods-say-first"
        ),
        pytest.param(None, (member(0).running(),), Reason.MEMBERS_STARTING, id="no-mirror-yet"),
    ],
)
def test_the_managers_mirror_ends_a_run_whose_pods_are_gone(mirrored: Any, pods: Any, reason: Reason) -> None:
    decided = decision.decide(observed_on_worker(mirrored, *pods), now=T0, policy=NO_LIMIT)
    assert decided.reason is reason
    assert len(decided.members) == 2


def test_a_dispatched_gang_asks_for_all_its_members() -> None:
    partial = gang_spec(mode=ReservationMode.KUEUE, size=4, min_size=2)
    dispatched = multikueue.dispatched_spec(partial)
    assert (dispatched.size, dispatched.floor, dispatched.min_size) == (4, 4, None)
    assert "min_size=2 < size=4" in multikueue.full_size_note(partial)
    whole = gang_spec(mode=ReservationMode.KUEUE, size=4)
    assert multikueue.dispatched_spec(whole) is whole
    job = manifests.kueue.job(dispatched, owner_uid="owner", multikueue=True)
    assert "annotations" not in job["metadata"]


def test_a_member_lost_on_the_worker_outranks_the_mirrors_failure() -> None:
    evicted = member(0).phase("Failed", "Evicted")
    decided = decision.decide(observed_on_worker(job(failed=1), evicted, member(1).running()), now=T0, policy=NO_LIMIT)
    assert decided.reason is Reason.MEMBER_LOST
