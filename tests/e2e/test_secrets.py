"""The connection's credentials - bearer token, client key and certificate, the kubeconfig itself -
never show in task logs, XComs, the Kubernetes objects and Events of the gang, the UI plugin's page or
the metadata database outside the ``trigger`` table, for a successful and a failed try.

How they travel: not at all. Triggers carry the connection id (``kubernetes_conn_id``) and resolve
it in the triggerer (``triggers.base.GangTrigger.connection_settings``), because the Airflow 3.3
execution API stores a *deferred task's* trigger kwargs as the plain JSON the Task SDK sends
(``api_fastapi/execution_api/routes/task_instances.py``: "If it's passed as a string, assume the
client encrypted it, otherwise assume it doesn't need to be"), Fernet key or not - only
``Trigger.from_object`` encrypts (``airflow/models/trigger.py``).
https://airflow.apache.org/docs/apache-airflow/stable/security/secrets/fernet.html

So the ``trigger`` rows, the trigger's ``repr`` and the ``DeferTask`` message Airflow's task supervisor
logs at DEBUG hold no credential either.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
import pytest
import yaml

from airflow_provider_gang.hooks.gang import GangHook
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.naming import GANG_LABEL, gang_name
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.apiserver import kubeconfig as sim_kubeconfig
from gang_sim.apiserver import tls
from gang_sim.apiserver.http.auth import Rule
from gang_sim.testing import ClusterHarness
from tests.e2e.gang_dags import simulated_pod

CONN_ID = "secretive"
FERNET_VARIABLE = "AIRFLOW__CORE__FERNET_KEY"


@dataclass(frozen=True)
class Credentials:
    """A kubeconfig file with a bearer token and a client certificate + key given as *files* (so
    ``GangHook`` inlines them as ``*-data``), and ``markers``: texts none of which may ever leak."""

    token: str
    kubeconfig: Path
    markers: dict[str, str]

    def leaks(self, text: str) -> list[str]:
        """Names of the markers found in ``text``."""
        return [name for name, marker in self.markers.items() if marker in text]


def with_client_certificate(document: dict[str, Any], directory: Path) -> Credentials:
    """Add a client certificate and key (files) to the user of kubeconfig ``document``; write it."""
    client = tls.generate()  # a certificate and its key; the emulator does not ask for it (TLS allows that)
    (directory / "client.crt").write_bytes(client.cert_pem)
    (directory / "client.key").write_bytes(client.key_pem)
    user = document["users"][0]["user"]
    user.update({"client-certificate": str(directory / "client.crt"), "client-key": str(directory / "client.key")})
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(document))

    def tail(data: bytes) -> str:  # the random end (signature, key bits), not the common PEM/ASN.1 header
        return base64.b64encode(data).decode()[-100:-40]

    markers = {
        "bearer token": str(user["token"]),
        "client key (PEM)": client.key_pem.decode().splitlines()[2],
        "client key (kubeconfig data)": tail(client.key_pem),
        "client certificate (PEM)": client.cert_pem.decode().splitlines()[-2],
        "client certificate (kubeconfig data)": tail(client.cert_pem),
        "kubeconfig (its CA data)": document["clusters"][0]["cluster"]["certificate-authority-data"][-100:-40],
    }
    assert all(len(marker) >= 24 for marker in markers.values()), markers
    return Credentials(token=str(user["token"]), kubeconfig=path, markers=markers)


def use_connection(monkeypatch: pytest.MonkeyPatch, credentials: Credentials) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{CONN_ID.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(credentials.kubeconfig)}}),
    )


@pytest.fixture
def fernet_key() -> Iterator[str]:
    """Airflow with a Fernet key, as every deployment should have (``get_fernet`` is cached)."""
    from airflow.models.crypto import get_fernet
    from cryptography.fernet import Fernet

    key, previous = Fernet.generate_key().decode(), os.environ.get(FERNET_VARIABLE)
    os.environ[FERNET_VARIABLE] = key
    get_fernet.cache_clear()
    try:
        yield key
    finally:
        if previous is None:
            os.environ.pop(FERNET_VARIABLE, None)
        else:
            os.environ[FERNET_VARIABLE] = previous
        get_fernet.cache_clear()


@pytest.fixture
def offline_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Credentials:
    """Credentials for a server that is never contacted (the trigger-row and repr checks)."""
    server = tls.generate()
    document = sim_kubeconfig.build("https://127.0.0.1:1", base64.b64encode(os.urandom(24)).decode(), server.ca_pem)
    credentials = with_client_certificate(document, tmp_path)
    use_connection(monkeypatch, credentials)
    return credentials


def reservation_trigger() -> ReservationTrigger:
    """The trigger as ``operators.execution.start_try`` builds it: the connection id, no credentials."""
    return ReservationTrigger(
        kubernetes_conn_id=CONN_ID,
        gang_name="g-t1-abc",
        namespace="default",
        deadline=time.time() + 600,
        mode="provisioning_request",
        size=2,
        started_at=time.time(),
        provisioning_request="g-t1-abc",
        try_number=1,
    )


def raw_trigger_row(trigger: ReservationTrigger) -> tuple[str, dict[str, Any]]:
    """Store ``trigger`` through ``Trigger.from_object`` (Airflow's constructor from a trigger object; a
    deferred task's row is written by the execution API instead, see the end-to-end test) and read back
    the raw ``trigger.kwargs`` column and the decrypted kwargs."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import text

    with create_session() as session:
        row = Trigger.from_object(trigger)
        session.add(row)
        session.flush()
        raw = session.execute(text("SELECT kwargs FROM trigger WHERE id = :id"), {"id": row.id}).scalar_one()
        decrypted = row.kwargs
        session.delete(row)
    return str(raw), decrypted


def test_trigger_kwargs_carry_the_connection_id_and_no_credential(
    fernet_key: str, offline_credentials: Credentials
) -> None:
    trigger = reservation_trigger()
    raw, decrypted = raw_trigger_row(trigger)
    assert decrypted["kubernetes_conn_id"] == CONN_ID and decrypted["connection"] is None
    assert offline_credentials.leaks(json.dumps(decrypted)) == [] and offline_credentials.leaks(raw) == []


async def test_the_trigger_resolves_its_connection_in_the_triggerer(offline_credentials: Credentials) -> None:
    settings = await reservation_trigger().connection_settings()
    assert settings == GangHook(conn_id=CONN_ID).connection_settings()  # what the worker would have resolved


def test_trigger_repr_hides_the_credentials(offline_credentials: Credentials) -> None:
    assert offline_credentials.leaks(repr(reservation_trigger())) == []


def test_defer_message_the_supervisor_logs_at_debug_hides_the_credentials(offline_credentials: Credentials) -> None:
    from types import SimpleNamespace

    import structlog
    from airflow.sdk._shared.secrets_masker import redact
    from airflow.sdk.exceptions import TaskDeferred
    from airflow.sdk.execution_time.task_runner import _defer_task

    ti = SimpleNamespace(dag_id="d", task_id="train", run_id="r", task=SimpleNamespace(queue="default"))
    deferral = TaskDeferred(trigger=reservation_trigger(), method_name="execute_reserved")
    message, _ = _defer_task(deferral, ti, structlog.get_logger())  # type: ignore[arg-type]
    logged = redact({"event": "Received message from task runner", "msg": message})  # sdk/log.py's processor
    assert offline_credentials.leaks(repr(logged)) == []


# -- a success and a failed try, end to end -----------------------------------------------------------


def tables_as_text() -> dict[str, str]:
    """Every value of every table of the metadata database as text, by table (bytes decoded leniently)."""
    from airflow import settings
    from sqlalchemy import inspect, text

    engine = settings.engine
    assert engine is not None
    tables: dict[str, str] = {}
    with engine.connect() as connection:
        for table in inspect(engine).get_table_names():
            rows = connection.execute(text(f'SELECT * FROM "{table}"'))
            tables[table] = "\n".join(
                " ".join(value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value) for value in row)
                for row in rows
            )
    return tables


def task_states(dag_run: Any) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id
            )
        ).all()
    return {task_id: str(getattr(state, "value", state)) for task_id, state in rows}


def run_xcoms(dag_run: Any) -> list[Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id)
        ).all()
        return [(row.task_id, row.key, XComModel.deserialize_value(row)) for row in rows]


def triggers_of(gangs: set[str]) -> dict[int, tuple[str, dict[str, Any]]]:
    """``{id: (raw kwargs column, decrypted kwargs)}`` of the trigger rows of ``gangs`` (rows of fired
    triggers stay in the table)."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(Trigger)).all()
        found = {row.id: (row.encrypted_kwargs, row.kwargs) for row in rows}
    return {id_: (raw, kwargs) for id_, (raw, kwargs) in found.items() if kwargs.get("gang_name") in gangs}


def plugin_page(dag_run: Any, task_id: str) -> str:
    """The Gang tab's HTML as the api-server serves it (the login dependency answered by a viewer of
    the configured auth manager: the routes ask it whether the user may read the DAG)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_provider_gang.plugin.routes import gang_app

    gang_app.dependency_overrides[get_user] = lambda: SimpleAuthManagerUser(username="viewer", role="viewer")
    try:
        response = TestClient(gang_app).get(
            "/ui/reservation",
            params={"dag_id": dag_run.dag_id, "run_id": dag_run.run_id, "task_id": task_id, "map_index": "{MAP_INDEX}"},
        )
    finally:
        gang_app.dependency_overrides.clear()
    assert response.status_code == 200, response.text
    return str(response.text)


def test_a_success_and_a_failed_try_leave_no_secret_behind(
    cluster_factory: Any,
    run_dag: Any,
    fernet_key: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.sdk import DAG

    cluster: ClusterHarness = cluster_factory("small", time_scale=60)
    _, user_kubeconfig = cluster.add_user("secret-holder", [Rule()])
    credentials = with_client_certificate(yaml.safe_load(user_kubeconfig.read_text()), tmp_path)
    use_connection(monkeypatch, credentials)
    committed: list[tuple[str, str]] = []  # (resource, object JSON) of every change the cluster stored
    store = cluster.store
    cluster.run(lambda: store.subscribe(lambda _event, resource, obj: committed.append((resource, json.dumps(obj)))))
    started = time.time()

    with DAG(dag_id="secrets", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        for task_id, exit_code in (("train", 0), ("fail", 1)):
            GangTrainingOperator(
                task_id=task_id,
                size=2,
                gpus=1,
                pod_template=simulated_pod(10, exit_code),
                distributed="torch",
                deferrable=True,
                kubernetes_conn_id=CONN_ID,
                log_ranks="all",
                reservation_timeout=timedelta(seconds=60),
                startup_timeout=timedelta(seconds=30),
            )
    dag_run = run_dag(dag)
    captured = capfd.readouterr()
    log_files = [
        path.read_text(errors="replace")
        for path in Path(os.environ["AIRFLOW_HOME"]).glob("logs/**/*")
        if path.is_file() and path.stat().st_mtime >= started
    ]
    logs = "\n".join([captured.out, captured.err, caplog.text, *log_files])

    assert task_states(dag_run) == {"train": "success", "fail": "failed"}
    # Each place is looked at for real: the gangs left their traces there.
    gangs = {task: gang_name(dag_run.dag_id, task, dag_run.run_id, attempt=1) for task in ("train", "fail")}
    assert all(f"Gang {gang}" in logs for gang in gangs.values()) and "Gang plan:" in logs, logs[-2000:]
    xcoms = run_xcoms(dag_run)
    assert {(task, key) for task, key, _ in xcoms} >= {
        ("train", "return_value"),
        ("train", "gang_reservation"),
        ("fail", "gang_reservation"),
    }, xcoms
    pods = [obj for resource, obj in committed if resource == "v1/pods" and GANG_LABEL in obj]
    assert pods and all('"env"' in obj for obj in pods)
    assert any(resource == "v1/events" for resource, _ in committed)
    triggers = triggers_of(set(gangs.values()))  # two per gang: reservation, run
    assert len(triggers) == 4 and all(kwargs["kubernetes_conn_id"] for _, kwargs in triggers.values())
    pages = [plugin_page(dag_run, task) for task in ("train", "fail")]
    assert all(gangs[task] in page for task, page in zip(("train", "fail"), pages, strict=True))

    assert credentials.leaks(logs) == []
    assert credentials.leaks(json.dumps([value for _, _, value in xcoms], default=str)) == []
    assert credentials.leaks("\n".join(obj for _, obj in committed)) == []
    assert credentials.leaks("\n".join(pages)) == []
    tables = tables_as_text()
    leaked = {table: credentials.leaks(text) for table, text in tables.items() if table != "trigger"}
    assert {table: found for table, found in leaked.items() if found} == {}

    assert [credentials.leaks(raw) for raw, _ in triggers.values()] == [[], [], [], []]
