"""The real tier: the provider end to end against the real control plane (``make real-cluster``).

One real cluster per session, so one per pytest-xdist worker as ``make real`` runs the tier (starting
Kueue and installing its CRDs takes most of a minute on two cores); every test leaves it as it found
it, which :func:`cluster` checks after the test: no pod, ProvisioningRequest, Workload, Job or
PodTemplate of a gang is left in ``default``. Airflow's metadata database is initialised once, as in
tests/e2e.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_gang.reservation import naming
from tests.real.backends import RealBackend, real_backend, wait_for
from tests.real.tally import Tables

GANG_KINDS = (
    "v1/pods",
    "v1/podtemplates",
    "v1/services",
    "batch/v1/jobs",
    "autoscaling.x-k8s.io/v1/provisioningrequests",
    "kueue.x-k8s.io/v1beta2/workloads",
)
GANG_SELECTOR = naming.GANG_LABEL
UNLABELLED_KINDS = frozenset({"kueue.x-k8s.io/v1beta2/workloads"})
"""Kinds whose objects of a gang carry no gang label: Kueue names and labels a Job's Workload itself
and copies only the Job labels its configuration's ``labelKeysToCopy`` names, none by default
(``pkg/controller/jobframework/reconciler.go``), so every Workload in ``default`` counts - only gangs
create Jobs there."""


def pytest_configure(config: pytest.Config) -> None:
    """The differential tests' tables (:mod:`tests.real.tally`), written at the end of the run."""
    config.pluginmanager.register(Tables(), "gang-compared-values")


@pytest.fixture(scope="session", autouse=True)
def airflow_db() -> None:
    from airflow.utils import db

    db.initdb()


@pytest.fixture(scope="session")
def real_session() -> Iterator[RealBackend]:
    with real_backend() as backend:
        yield backend


def leftovers(backend: Any, kinds: tuple[str, ...] = GANG_KINDS) -> dict[str, list[str]]:
    """Objects of gangs (anything labelled with the gang label, and every Workload) of ``kinds`` still
    in ``default``, by kind."""
    found = {
        kind: [
            item["metadata"]["name"]
            for item in backend.objects(kind, label_selector="" if kind in UNLABELLED_KINDS else GANG_SELECTOR)
        ]
        for kind in kinds
    }
    return {kind: names for kind, names in found.items() if names}


@pytest.fixture
def cluster(real_session: RealBackend) -> Iterator[RealBackend]:
    """The session's real cluster; after the test, waits until nothing of a gang is left (GC is async)."""
    yield real_session
    wait_for(lambda: not leftovers(real_session), timeout=90, what="no gang object left in default")
