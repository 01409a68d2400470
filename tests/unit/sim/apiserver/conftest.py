"""The fixture of the store tests."""

from __future__ import annotations

import pytest

from gang_sim.apiserver.store import Store


@pytest.fixture
def store() -> Store:
    """A store with seeded names and a wall clock fixed at 2027-01-15T08:00:00Z."""
    return Store(seed=1, wall_clock=lambda: 1_800_000_000.0)
