"""Deployment-wide defaults through Airflow's configuration (``[gang]``, ``AIRFLOW__GANG__...``): an
option changes the default of every task, and a task's own argument wins over it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation import deployment

GOOD: dict[str, Any] = {"task_id": "train", "image": "trainer:1", "size": 2}


def test_unset_options_are_the_record_defaults() -> None:
    settings = GangTrainingOperator(**GOOD).try_settings()
    assert settings.argument_error is None
    assert settings.client_options.to_dict() == dict(deployment.CLIENT_DEFAULTS)
    assert settings.heartbeat_seconds == 300.0 and settings.watch_timeout_seconds == 300
    assert settings.configured is not None and settings.configured.cloud.name == "gke"


def test_client_options_in_the_environment_change_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_REQUEST_TIMEOUT", "5")
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_RETRY_ATTEMPTS", "3")
    options = GangTrainingOperator(**GOOD).try_settings().client_options
    assert (options.request_timeout, options.retry_attempts, options.qps) == (5.0, 3, 1000.0)


def test_the_task_argument_wins_over_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_REQUEST_TIMEOUT", "5")
    monkeypatch.setenv("AIRFLOW__GANG__CLIENT_RETRY_ATTEMPTS", "3")
    options = GangTrainingOperator(**GOOD, client_options={"request_timeout": 7}).try_settings().client_options
    assert (options.request_timeout, options.retry_attempts) == (7.0, 3)


def test_heartbeat_and_watch_timeout_come_from_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__HEARTBEAT_INTERVAL", "42")
    monkeypatch.setenv("AIRFLOW__GANG__WATCH_TIMEOUT", "77")
    settings = GangTrainingOperator(**GOOD).try_settings()
    assert (settings.heartbeat_seconds, settings.watch_timeout_seconds) == (42.0, 77)


def test_the_default_cloud_option_applies_below_the_connection_and_the_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__DEFAULT_CLOUD", "eks")
    monkeypatch.setenv("AIRFLOW_CONN_KUBE_AKS", json.dumps({"conn_type": "kubernetes", "extra": {"cloud": "aks"}}))
    plain = GangTrainingOperator(**GOOD, kubernetes_conn_id="no_such_connection").try_settings()
    assert plain.configured is not None and plain.configured.cloud.name == "eks"
    by_connection = GangTrainingOperator(**GOOD, kubernetes_conn_id="kube_aks").try_settings()
    assert by_connection.configured is not None and by_connection.configured.cloud.name == "aks"
    argued = GangTrainingOperator(**GOOD, kubernetes_conn_id="kube_aks", cloud="karpenter").try_settings()
    assert argued.configured is not None and argued.configured.cloud.name == "karpenter"


@pytest.mark.parametrize(
    ("variable", "value", "argument", "said"),
    [
        ("CLIENT_RETRY_ATTEMPTS", "many", "[gang] client_retry_attempts", "'many' is not a whole number"),
        ("CLIENT_RETRY_ATTEMPTS", "0", "[gang] client_retry_attempts", "retry_attempts must be a whole number >= 1"),
        ("HEARTBEAT_INTERVAL", "-5", "[gang] heartbeat_interval", "'-5' is negative"),
        ("DEFAULT_CLOUD", "azure", "cloud", "[gang] default_cloud: 'azure' is no cloud profile"),
    ],
)
def test_a_malformed_option_ends_the_try_before_anything_is_created_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, argument: str, said: str
) -> None:
    monkeypatch.setenv(f"AIRFLOW__GANG__{variable}", value)
    settings = GangTrainingOperator(**GOOD, kubernetes_conn_id="no_such_connection").try_settings()
    assert settings.configured is None and settings.argument_error is not None
    assert settings.argument_error.argument == argument
    assert said in str(settings.argument_error)


KUEUE: dict[str, Any] = {**GOOD, "reservation": "kueue", "kueue_queue": "team"}


def test_multikueue_connections_come_from_the_option_unless_the_task_names_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert GangTrainingOperator(**KUEUE).try_settings().multikueue_connections == {}
    monkeypatch.setenv("AIRFLOW__GANG__MULTIKUEUE_CONNECTIONS", json.dumps({"worker-1": "kube_worker1"}))
    assert GangTrainingOperator(**KUEUE).try_settings().multikueue_connections == {"worker-1": "kube_worker1"}
    own = GangTrainingOperator(**KUEUE, multikueue_connections={"worker-2": "kube_worker2"}).try_settings()
    assert own.multikueue_connections == {"worker-2": "kube_worker2"}


def test_a_malformed_multikueue_connections_option_ends_the_try_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__GANG__MULTIKUEUE_CONNECTIONS", '{"worker-1": ')
    settings = GangTrainingOperator(**KUEUE).try_settings()
    assert settings.argument_error is not None
    assert settings.argument_error.argument == "[gang] multikueue_connections"
    assert "is not a JSON object" in str(settings.argument_error)
    assert "AIRFLOW__GANG__MULTIKUEUE_CONNECTIONS" in str(settings.argument_error)
