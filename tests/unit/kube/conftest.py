"""Fixtures for kube/ tests: the emulator (``sim``), connection settings for it, a setup client - the
same ones the other emulator-backed suite uses, defined in :mod:`tests.unit.kube.emulated`."""

from __future__ import annotations

import pytest

from tests.unit.kube.emulated import client, connection, register_emulator_marker, sim

__all__ = ["client", "connection", "sim"]


def pytest_configure(config: pytest.Config) -> None:
    register_emulator_marker(config)
