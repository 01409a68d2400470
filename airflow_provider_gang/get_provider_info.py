"""Provider metadata for Airflow's provider discovery.

This module must import nothing from ``airflow``: discovery imports it while Airflow itself is
still initialising, and an airflow import here makes discovery circular. ``package-name`` must
equal the distribution name, which Airflow checks against the installed metadata. The ``config``
section is ``reservation.deployment``'s record of the ``[gang]`` options (pure: no airflow).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.reservation import deployment

INTEGRATION = "Gang scheduling"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description that Airflow validates against its provider schema
    (``airflow/provider_info.schema.json``)."""
    return {
        "package-name": "airflow-provider-gang",
        "name": "Gang scheduling for Kubernetes",
        "description": "Start distributed GPU jobs on Kubernetes all-or-nothing: reserve capacity for the "
        "whole gang in one of five modes - a cluster-autoscaler ProvisioningRequest, a ProvisioningRequest "
        "with members held behind scheduling gates, a Kueue workload, Kubernetes' own gang scheduling "
        "(Workload API PodGroup), or auto (the Workload API where served, else gates) - wait for it in "
        "deferrable triggers, launch every member with its rank environment, watch them as one gang, and "
        "walk a fallback ladder under one start_by window. GangTrainingOperator and @task.gang.",
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://kubernetes.io/docs/concepts/scheduling-eviction/gang-scheduling/",
                "tags": ["software"],
            }
        ],
        "connection-types": [],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_gang.triggers.reservation",
                    "airflow_provider_gang.triggers.gang_run",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_gang.operators.training"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_gang.hooks.gang"],
            }
        ],
        "task-decorators": [{"name": "gang", "class-name": "airflow_provider_gang.decorators.gang.gang_task"}],
        "extra-links": ["airflow_provider_gang.links.GangReservationLink"],
        "config": deployment.provider_config(),
        # `airflow gang sweep` (airflow_provider_gang.sweep.command).
        "cli": ["airflow_provider_gang.sweep.command.get_cli_commands"],
    }
