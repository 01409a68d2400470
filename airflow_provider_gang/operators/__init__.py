"""Airflow operators of the provider: ``GangTrainingOperator``."""

from airflow_provider_gang.operators.training import GangTrainingOperator

__all__ = ["GangTrainingOperator"]
