"""``@task.gang`` end to end on the emulator: the decorated function runs on every rank as a local
process (``python:*`` images), rank 0's return value reaches the next task, and every way it can go
wrong - a failing rank, a return value too large or not JSON, rank 0 leaving or killed before writing
it, its line malformed - fails the task naming why, with nothing left on the cluster."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pendulum
import pytest

from airflow_provider_gang.links import GANG_SUMMARY_XCOM_KEY
from airflow_provider_gang.member.function_call import MARKER, MAX_RETURN_VALUE_BYTES
from airflow_provider_gang.plugin.stored_records import read_gang_xcoms
from tests.e2e.gang_dags import gang_objects, run_dag_test

GANG = {
    "image": "python:3.11-slim",
    "distributed": "torch",
    "reservation_timeout": 300,
    "startup_timeout": 120,
    "run_timeout": 120,
    "log_ranks": "all",
}
# The functions the members run. Each runs from its source in a fresh namespace: imports inside.


def rank_environment(epochs: int, *, note: str = "") -> dict[str, Any]:
    import os

    rank = int(os.environ["RANK"])
    print(f"rank {rank} trains {epochs} epochs")
    return {"rank": rank, "world_size": int(os.environ["WORLD_SIZE"]), "epochs": epochs, "note": note}


def rank_1_fails() -> str:
    import os
    import time

    if os.environ["RANK"] == "1":
        raise RuntimeError("rank 1 gives up")
    time.sleep(600)  # the others run on until the gang is torn down
    return "unreachable"


def too_large(limit: int) -> str:
    return "x" * (limit + 1)


def not_json() -> dict[str, Any]:
    return {"labels": {"a", "b"}}


def leaves_without_writing() -> int:
    import os

    os._exit(0)


def killed_before_writing() -> int:
    import os
    import signal

    if os.environ["RANK"] == "0":
        os.kill(os.getpid(), signal.SIGKILL)
    return 1


def writes_a_cut_line(marker: str) -> int:
    import os
    import sys

    sys.stdout.write(f"\n{marker}" + '{"loss": 0.\n')  # as if the line had been cut
    sys.stdout.flush()
    os._exit(0)


def gang_then_report(
    dag_id: str, function: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, **arguments: Any
) -> Any:
    """A DAG: ``function(*args, **kwargs)`` as ``@task.gang(**arguments)``, its value handed to ``report``."""
    from airflow.sdk import DAG, task

    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        params={"note": "templated"},
    ) as dag:

        @task
        def report(value: Any) -> Any:
            return {"received": value}

        report(task.gang(task_id="train", **{**GANG, **arguments})(function)(*args, **(kwargs or {})))
    return dag


def xcom(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, key=key, task_ids=task_id, dag_ids=dag_run.dag_id)
        row = session.scalars(query).first()
        return None if row is None else XComModel.deserialize_value(row)


def states(dag_run: Any) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(TaskInstance).where(TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id)
        return {ti.task_id: str(ti.state) for ti in session.scalars(query)}


@pytest.fixture
def local_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


KINDS_OF_GANG = [
    pytest.param("small", 2, {"reservation": "gates", "deferrable": True}, id="gates-deferred"),
    pytest.param("small", 4, {"reservation": "provisioning_request", "deferrable": False}, id="provisioning-blocking"),
    pytest.param("kueue", 3, {"reservation": "kueue", "kueue_queue": "team-a", "deferrable": True}, id="kueue"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("scenario", "size", "arguments"), KINDS_OF_GANG)
def test_rank_0_s_return_value_reaches_the_next_task(
    cluster_factory: Any,
    local_python: None,
    capfd: pytest.CaptureFixture[str],
    scenario: str,
    size: int,
    arguments: dict[str, Any],
) -> None:
    cluster = cluster_factory(scenario, time_scale=60)
    dag = gang_then_report(
        f"decorated_{arguments['reservation']}",
        rank_environment,
        (3,),
        {"note": "{{ params.note }}"},  # op_kwargs are rendered before the call is sent
        size=size,
        **arguments,
    )
    dag_run = run_dag_test(dag)
    expected = {"rank": 0, "world_size": size, "epochs": 3, "note": "templated"}
    assert states(dag_run) == {"train": "success", "report": "success"}
    assert xcom(dag_run, "train") == expected
    assert xcom(dag_run, "report") == {"received": expected}
    summary = xcom(dag_run, "train", GANG_SUMMARY_XCOM_KEY)
    assert summary["tries"][-1]["outcome"] == "all_succeeded" and summary["size_run"] == size
    assert set(summary["exit_codes"].values()) == {0}
    assert all(f"rank {rank} trains 3 epochs" in summary["rank_logs"][str(rank)] for rank in range(size))
    assert MARKER not in capfd.readouterr().out and all(MARKER not in text for text in summary["rank_logs"].values())
    assert read_gang_xcoms(dag_run.dag_id, dag_run.run_id, "train")["summary"] == summary  # the UI page's
    assert gang_objects(cluster) == {}


FAULTS = [
    pytest.param(rank_1_fails, (), 3, ["member_failed", "RuntimeError: rank 1 gives up"], id="a-rank-fails"),
    pytest.param(
        too_large,
        (MAX_RETURN_VALUE_BYTES,),
        2,
        ["exit code 65", f"@task.gang: rank 0's return value is {MAX_RETURN_VALUE_BYTES + 3} bytes as JSON"],
        id="return-value-too-large",
    ),
    pytest.param(
        not_json,
        (),
        2,
        ["exit code 65", "rank 0's return value is not JSON-serializable (Object of type set"],
        id="return-value-not-json",
    ),
    pytest.param(
        leaves_without_writing,
        (),
        2,
        ["member_failed", "@task.gang: rank 0 exited 0 but its log holds no return value line"],
        id="rank-0-leaves-before-writing",
    ),
    pytest.param(killed_before_writing, (), 2, ["member_failed", "exit code 137"], id="rank-0-killed-before-writing"),
    pytest.param(
        writes_a_cut_line,
        (MARKER,),
        2,
        ["member_failed", "@task.gang: rank 0's return value line is not JSON"],
        id="return-value-line-malformed",
    ),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("function", "args", "size", "said"), FAULTS)
def test_a_failure_fails_the_task_naming_why_and_leaves_nothing(
    cluster_factory: Any,
    local_python: None,
    capfd: pytest.CaptureFixture[str],
    function: Any,
    args: tuple[Any, ...],
    size: int,
    said: list[str],
) -> None:
    cluster = cluster_factory("small", time_scale=60)
    dag_run = run_dag_test(gang_then_report(f"decorated_{function.__name__}", function, args, size=size))
    assert states(dag_run) == {"train": "failed", "report": "upstream_failed"}
    assert xcom(dag_run, "train") is None
    log = capfd.readouterr().out
    assert all(fragment in log for fragment in said), [fragment for fragment in said if fragment not in log]
    assert gang_objects(cluster) == {}
