"""``pod_template`` and ``pod_template_file``'s path are templated, as the KubernetesPodOperator's
``pod_template_dict`` and ``pod_template_file`` are (``template_fields`` of
``airflow/providers/cncf/kubernetes/operators/pod.py``): Jinja in the template's strings and in the
path is rendered with the task's context before the gang is described; at parse time such a value
stands in for a neutral pod, and is checked once rendered."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pendulum
import pytest
import yaml

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError
from demo.cluster import free_port
from tests.e2e.gang_dags import run_dag_test, summary_of

PRINT_RANK = "import os; print('{{ params.greeting }} from rank', os.environ['GANG_RANK'])"


def templated_pod() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"purpose": "{{ params.purpose }}"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "{{ params.image }}", "command": ["python", "-c", PRINT_RANK]},
            ]
        },
    }


def one_task_dag(dag_id: str, **operator_arguments: Any) -> Any:
    from airflow.sdk import DAG

    params = {"greeting": "hello", "image": "python:3.11-slim", "purpose": "smoke", "folder": ""}
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        params=params,
    ) as dag:
        GangTrainingOperator(
            task_id="train", size=2, reservation_timeout=300, startup_timeout=120, run_timeout=120,
            log_ranks="all", **operator_arguments,
        )  # fmt: skip
    return dag


@pytest.mark.timeout(240)
def test_jinja_in_the_pod_template_is_rendered_before_the_gang_starts(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    cluster = cluster_factory("small", time_scale=60, record_changes=True)
    dag_run = run_dag_test(one_task_dag("templated_pod", pod_template=templated_pod()))
    assert dag_run.state == "success"
    summary = summary_of(dag_run)
    assert "hello from rank 0" in summary["rank_logs"]["0"] and "hello from rank 1" in summary["rank_logs"]["1"]
    pods = [pod for _, pod in cluster.changes("v1/pods")]
    assert pods and {pod["spec"]["containers"][0]["image"] for pod in pods} == {"python:3.11-slim"}
    assert {pod["metadata"]["labels"]["purpose"] for pod in pods} == {"smoke"}


@pytest.mark.timeout(240)
def test_a_templated_pod_template_file_path_is_rendered_then_read(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    pod = {"kind": "Pod", "spec": {"containers": [{"name": "main", "image": "python:3.12", "command": ["python"]}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    cluster_factory("small", time_scale=60)
    dag = one_task_dag(
        "templated_pod_file",
        pod_template_file="{{ params.folder }}/pod.yaml",
        args=["-c", "print('read from the rendered path')"],
    )
    dag_run = run_dag_test(dag, run_conf={"folder": str(tmp_path)})
    assert dag_run.state == "success"
    assert "read from the rendered path" in summary_of(dag_run)["rank_logs"]["0"]


def test_at_parse_time_a_templated_pod_template_leaves_the_other_arguments_checked() -> None:
    template = templated_pod()
    template["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "{{ params.cpu }}"}}
    operator = GangTrainingOperator(task_id="t", size=2, pod_template=template, master_port=free_port())
    operator.pod_template = {**template, "spec": {"containers": [{"name": "main", "image": "i", "resources": {}}]}}
    operator.check_arguments(rendered=True)  # rendered to a valid pod: accepted
    with pytest.raises(GangArgumentError) as caught:
        GangTrainingOperator(task_id="t", size=2, pod_template=template, min_size=3)
    assert caught.value.argument == "min_size"
    operator.pod_template = {"spec": {"containers": [{"name": "main", "image": "i", "resources": "{{ x }}"}]}}
    with pytest.raises(GangArgumentError) as rendered_badly:
        operator.check_arguments(rendered=True)
    assert rendered_badly.value.argument.startswith("pod_template")
