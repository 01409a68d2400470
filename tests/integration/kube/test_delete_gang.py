"""``hooks.deletion.delete_gang``, the one deletion of a gang, against the emulator: what it deletes,
that deleting again is done, and its error policy - retryable failures get another pass, a
non-retryable one or the last pass's failure is raised."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import yaml

from airflow_provider_gang.hooks import creation, deletion
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import POD_TEMPLATES, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.settings import ConnectionSettings
from gang_sim.apiserver.http.auth import Rule
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness
from tests.builders import gang_spec

T = TypeVar("T")
SPEC = gang_spec(name="delete-t1-00000000", namespace="default", size=3)
QUICK = ClientOptions(retry_attempts=1, retry_base_delay=0.01, retry_max_delay=0.02)
KINDS = ("configmaps", "podtemplates", "provisioningrequests")
RESERVATION = deletion.gang_targets(SPEC.name, SPEC.mode, (PROVISIONING_REQUESTS, POD_TEMPLATES))
"""The gang's reservation objects without their owner, whose deletion would collect them too."""
OWNER_ONLY = {"configmaps": 1, "podtemplates": 0, "provisioningrequests": 0}


def on_cluster(harness: ClusterHarness, work: Callable[[KubeClient], Awaitable[T]], kubeconfig: Any = None) -> T:
    settings = ConnectionSettings(kubeconfig=kubeconfig or yaml.safe_load(harness.kubeconfig_path.read_text()))

    async def main() -> T:
        async with await QUICK.connect(settings) as client:
            return await work(client)

    return asyncio.run(main())


def left(harness: ClusterHarness) -> dict[str, int]:
    """How many objects of each gang kind the store still holds."""
    keys = {"configmaps": "v1/configmaps", "podtemplates": "v1/podtemplates"}
    keys["provisioningrequests"] = "autoscaling.x-k8s.io/v1/provisioningrequests"
    return {kind: len(harness.run(lambda key=key: harness.store.list(key, "default")[0])) for kind, key in keys.items()}


def faults(harness: ClusterHarness, spec: str) -> None:
    assert harness.emulator is not None
    context = harness.emulator.context
    harness.run(lambda: setattr(context, "faults", Faults.parse(spec)))


@pytest.mark.timeout(60)
def test_a_gang_is_deleted_once_and_deleting_it_again_is_done() -> None:
    with ClusterHarness(seed=0) as harness:
        on_cluster(harness, lambda client: creation.ensure_reservation(client, SPEC, owner_try=1))
        assert left(harness) == dict.fromkeys(KINDS, 1)
        assert on_cluster(harness, lambda client: deletion.delete_gang(client, "default", RESERVATION)) == 2
        assert left(harness) == OWNER_ONLY
        assert on_cluster(harness, lambda client: deletion.delete_gang(client, "default", RESERVATION)) == 0
        on_cluster(harness, lambda client: deletion.delete_gang(client, "default", deletion.kill_targets(SPEC)))
        assert left(harness) == dict.fromkeys(KINDS, 0)


@pytest.mark.timeout(60)
def test_retryable_failures_get_another_pass() -> None:
    with ClusterHarness(seed=0) as harness:
        on_cluster(harness, lambda client: creation.ensure_reservation(client, SPEC, owner_try=1))
        faults(harness, "delete:1.0:503:count:2")  # the client tries once: the first pass fails for both
        assert on_cluster(harness, lambda client: deletion.delete_gang(client, "default", RESERVATION)) == 2
        assert left(harness) == OWNER_ONLY


@pytest.mark.timeout(60)
def test_the_last_pass_s_failure_is_raised() -> None:
    with ClusterHarness(seed=0) as harness:
        on_cluster(harness, lambda client: creation.ensure_reservation(client, SPEC, owner_try=1))
        faults(harness, "delete:1.0:503:count:3")  # one pass more than delete_gang makes
        with pytest.raises(errors.Unavailable):
            on_cluster(harness, lambda client: deletion.delete_gang(client, "default", RESERVATION[:1]))
        assert left(harness) == dict.fromkeys(KINDS, 1)


@pytest.mark.timeout(60)
def test_a_refusal_is_raised_without_another_pass() -> None:
    with ClusterHarness(seed=0) as harness:
        on_cluster(harness, lambda client: creation.ensure_reservation(client, SPEC, owner_try=1))
        _, path = harness.add_user("reader", [Rule(("get", "list"), ("*",), ("*",))])
        with pytest.raises(errors.Forbidden):
            on_cluster(
                harness,
                lambda client: deletion.withdraw(client, "default", [SPEC.name], SPEC.mode),
                kubeconfig=yaml.safe_load(path.read_text()),
            )
        assert left(harness) == dict.fromkeys(KINDS, 1)


@pytest.mark.timeout(60)
def test_the_owner_is_deleted_only_if_unchanged() -> None:
    with ClusterHarness(seed=0) as harness:
        on_cluster(harness, lambda client: creation.ensure_reservation(client, SPEC, owner_try=1))
        owner = on_cluster(harness, lambda client: deletion.read_owner(client, SPEC.name, "default"))
        assert owner is not None
        on_cluster(harness, lambda client: creation.claim_owner(client, SPEC, 2))  # a newer try marks it
        assert on_cluster(harness, lambda client: deletion.delete_owner_if_unchanged(client, "default", owner)) is None
        fresh = on_cluster(harness, lambda client: deletion.read_owner(client, SPEC.name, "default"))
        assert fresh is not None
        assert on_cluster(harness, lambda client: deletion.delete_owner_if_unchanged(client, "default", fresh)) is True
        assert on_cluster(harness, lambda client: deletion.read_owner(client, SPEC.name, "default")) is None
