"""The Airflow listener that withdraws the gangs of task instances that ended (``listeners`` of
:class:`~airflow_provider_gang.plugin.GangPlugin`).

Airflow calls these hooks wherever a task instance changes state (``airflow/_shared/listeners/spec/
taskinstance.py`` in Airflow 3.3): the task runner at the end of a try (``finalize`` in
``airflow/sdk/execution_time/task_runner.py``, also with ``up_for_retry`` through
``on_task_instance_failed``), the scheduler when it fails a task without heartbeat
(``TaskInstance.fetch_handle_failure_context``), the api-server when a user sets a state
(``_emit_state_listener_hooks`` in ``api_fastapi/core_api/services/public/task_instances.py``).
Each hook hands the task instance to ``sweep.listener_actions``, which decides and never raises:
Airflow logs a raising listener and goes on, but a state change must not even wait for a cluster.
"""

from __future__ import annotations

from typing import Any

from pluggy import HookimplMarker

from airflow_provider_gang.sweep import listener_actions

hookimpl = HookimplMarker("airflow")
"""Airflow's marker (``airflow.listeners.hookimpl`` is this, for the project name ``airflow``)."""


@hookimpl
def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
    """A gang task starts under ``airflow dags test``: withdraw what killed earlier test runs left."""
    listener_actions.task_instance_started(task_instance)


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    listener_actions.task_instance_ended(task_instance)


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    """Called for ``up_for_retry`` too: ``listener_actions`` acts on final states only."""
    listener_actions.task_instance_ended(task_instance)
