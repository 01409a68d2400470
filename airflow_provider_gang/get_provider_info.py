"""Provider metadata for Airflow's provider discovery.

This module must import nothing from ``airflow``: discovery imports it while Airflow itself is
still initialising, and an airflow import here makes discovery circular. ``package-name`` must
equal the distribution name, which Airflow checks against the installed metadata.
"""

from __future__ import annotations

from typing import Any

CONFIG_SECTION = "gang"
"""The provider's section of ``airflow.cfg`` (``AIRFLOW__GANG__<OPTION>``): deployment-wide defaults."""
MULTIKUEUE_CONNECTIONS_OPTION = "multikueue_connections"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description that Airflow validates against its provider schema."""
    return {
        "package-name": "airflow-provider-gang",
        "name": "Gang scheduling for Kubernetes",
        "description": "Reserve capacity as a gang (ProvisioningRequest, Kueue or scheduling gates), "
        "wait for it in deferrable triggers, and launch distributed GPU jobs all-or-nothing.",
        "connection-types": [],
        "triggers": [
            {
                "integration-name": "Gang scheduling",
                "python-modules": [
                    "airflow_provider_gang.triggers.reservation",
                    "airflow_provider_gang.triggers.gang_run",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": "Gang scheduling",
                "python-modules": ["airflow_provider_gang.operators.training"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Gang scheduling",
                "python-modules": ["airflow_provider_gang.hooks.gang"],
            }
        ],
        "extra-links": ["airflow_provider_gang.links.GangReservationLink"],
        # `airflow gang sweep` (airflow_provider_gang.sweep.command).
        "cli": ["airflow_provider_gang.sweep.command.get_cli_commands"],
        "config": {
            CONFIG_SECTION: {
                "description": "Deployment-wide defaults of GangTrainingOperator.",
                "options": {
                    MULTIKUEUE_CONNECTIONS_OPTION: {
                        "description": "A JSON object mapping Kueue MultiKueueCluster names to the Airflow "
                        "kubernetes connections that reach those worker clusters, used by every "
                        "GangTrainingOperator whose own multikueue_connections argument is not set. A worker "
                        "without a connection still runs its gangs; they are followed through the manager's "
                        "mirrored Job status only (no rank logs, no member detail).",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": '{"worker-1": "kube_worker1", "worker-2": "kube_worker2"}',
                        "default": "",
                    }
                },
            }
        },
    }
