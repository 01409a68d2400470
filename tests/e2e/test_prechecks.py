"""A cluster that cannot run the gang is refused before anything is created, by name, without retry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_gang.sim.api.auth import Rule
from tests.e2e.gang_dags import gang_dag, simulated_pod, task_instance

GANG_OBJECT_KINDS = ("v1/configmaps", "v1/pods", "v1/podtemplates")


def nothing_created(cluster: Any) -> bool:
    return all(not cluster.objects(kind, label_selector="airflow-gang.io/gang") for kind in GANG_OBJECT_KINDS)


def test_missing_provisioning_request_crd_fails_fast_by_name(cluster_factory: Any, run_dag: Any,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    cluster = cluster_factory("small", time_scale=60, preload_crds=False)
    dag = gang_dag("missing_crd", retries=2, size=2, gpus=1, pod_template=simulated_pod(10), deferrable=True)
    ti = task_instance(run_dag(dag))
    assert (ti.state, ti.try_number) == ("failed", 1)
    assert "does not serve provisioningrequests.autoscaling.x-k8s.io/v1" in capfd.readouterr().out
    assert nothing_created(cluster)


def test_missing_permission_fails_fast_by_name(cluster_factory: Any, run_dag: Any,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    cluster = cluster_factory("small", time_scale=60)
    _, kubeconfig = cluster.harness.add_user("read-only-autoscaling", [
        Rule(groups=("", "batch")),
        Rule(verbs=("get", "list", "watch"), groups=("autoscaling.x-k8s.io",)),
    ])
    monkeypatch.setenv("AIRFLOW_CONN_LIMITED", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}))
    dag = gang_dag("missing_permission", retries=2, size=2, gpus=1, pod_template=simulated_pod(10),
                   deferrable=True, kubernetes_conn_id="limited")
    ti = task_instance(run_dag(dag))
    assert (ti.state, ti.try_number) == ("failed", 1)
    log = capfd.readouterr().out
    assert "missing permission" in log and "create provisioningrequests.autoscaling.x-k8s.io" in log
    assert nothing_created(cluster)
