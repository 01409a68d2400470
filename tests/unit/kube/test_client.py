"""KubeClient against the emulator: retries with backoff (fake time), typed errors, patch types, auth."""

from __future__ import annotations

import random

import pytest

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient, PatchType
from airflow_provider_gang.kube.resources import CONFIG_MAPS, PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings
from tests.builders import config_map, pod, provisioning_request


class FakeSleep:
    """Records requested sleeps instead of sleeping (the client's injected ``sleep``)."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


async def connect(connection, sleep: FakeSleep, attempts: int = 6) -> KubeClient:
    policy = RetryPolicy(attempts=attempts, base_delay=0.5, max_delay=30.0, rng=random.Random(3))
    return await KubeClient.connect(ConnectionSettings.from_dict(connection), retry=policy, sleep=sleep)


async def test_throttled_requests_are_retried_honouring_retry_after(sim, connection):
    sim.set_faults("list:0.5:429,seed:4")
    sleep = FakeSleep()
    async with await connect(connection, sleep, attempts=50) as client:
        items, version = await client.list(PODS)
        assert items == [] and version
        throttled = sim.metrics()["codes"].get("429", 0)
        assert throttled >= 1
        assert client.requests_sent == throttled + 1
    assert len(sleep.calls) == throttled
    assert all(delay >= 1.0 for delay in sleep.calls)  # the emulator's Retry-After is 1 s


async def test_server_errors_exhaust_the_budget_then_raise_unavailable(sim, connection):
    sim.set_faults("get:1.0:503")
    sleep = FakeSleep()
    async with await connect(connection, sleep, attempts=4) as client:
        with pytest.raises(errors.Unavailable) as raised:
            await client.get(CONFIG_MAPS, "anything")
    assert raised.value.code == 503 and raised.value.retryable
    assert len(sleep.calls) == 3
    assert sim.metrics()["codes"] == {"503": 4}
    # Exponential ceilings 0.5, 1, 2 bound the jittered delays.
    assert all(delay <= ceiling for delay, ceiling in zip(sleep.calls, [0.5, 1.0, 2.0], strict=True))


async def test_answers_map_to_typed_errors(sim, client):
    with pytest.raises(errors.NotFound):
        await client.get(CONFIG_MAPS, "missing")
    await client.create(CONFIG_MAPS, config_map("one"))
    with pytest.raises(errors.AlreadyExists):
        await client.create(CONFIG_MAPS, config_map("one"))
    bad = provisioning_request("bad")
    bad["spec"]["podSets"] = []  # type: ignore[index]
    with pytest.raises(errors.Invalid) as invalid:
        await client.create(PROVISIONING_REQUESTS, bad)
    assert invalid.value.causes and any("podSets" in cause.field for cause in invalid.value.causes)
    stale = await client.get(CONFIG_MAPS, "one")
    await client.patch(CONFIG_MAPS, "one", {"data": {"a": "1"}})
    with pytest.raises(errors.Conflict):
        await client.patch(CONFIG_MAPS, "one", {"metadata": {"resourceVersion": stale["metadata"]["resourceVersion"]}})


async def test_every_patch_type_is_sent_with_its_content_type(sim, client):
    await client.create(PODS, pod("p", labels={"app": "x"}))
    await client.create(PROVISIONING_REQUESTS, provisioning_request("pr"))
    merged = await client.patch(PROVISIONING_REQUESTS, "pr", {"metadata": {"labels": {"k": "v"}}})
    assert merged["metadata"]["labels"] == {"k": "v"}
    json_patched = await client.patch(
        PROVISIONING_REQUESTS,
        "pr",
        [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
        patch_type=PatchType.JSON,
    )
    assert json_patched["metadata"]["annotations"] == {"a": "b"}
    strategic = await client.patch(PODS, "p", {"metadata": {"labels": {"role": "m"}}}, patch_type=PatchType.STRATEGIC)
    assert strategic["metadata"]["labels"] == {"app": "x", "role": "m"}
    # A real API server refuses strategic merge on custom resources (415): the type really is sent.
    with pytest.raises(errors.BadRequest) as refused:
        await client.patch(PROVISIONING_REQUESTS, "pr", {"metadata": {}}, patch_type=PatchType.STRATEGIC)
    assert refused.value.code == 415
    status = await client.patch(
        PROVISIONING_REQUESTS,
        "pr",
        {
            "status": {
                "conditions": [
                    {
                        "type": "Accepted",
                        "status": "True",
                        "reason": "R",
                        "message": "m",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            }
        },
        subresource="status",
    )
    assert status["status"]["conditions"][0]["type"] == "Accepted"


async def test_delete_is_idempotent_and_list_follows_selectors(sim, client):
    for name in ("a", "b"):
        await client.create(PODS, pod(name, labels={"app": "x"}))
    items, _ = await client.list(PODS, label_selector="app=x", page_size=1)
    assert sorted(item["metadata"]["name"] for item in items) == ["a", "b"]
    assert await client.delete(CONFIG_MAPS, "never-existed") is False
    assert await client.delete(PODS, "a") is True


async def test_delete_with_preconditions_refuses_an_object_changed_since_it_was_read(sim, client):
    read = await client.create(CONFIG_MAPS, config_map("owner", {"size": "2"}))
    preconditions = {"uid": read["metadata"]["uid"], "resourceVersion": read["metadata"]["resourceVersion"]}
    await client.patch(CONFIG_MAPS, "owner", {"data": {"size": "4"}})
    with pytest.raises(errors.Conflict) as refused:
        await client.delete(CONFIG_MAPS, "owner", preconditions=preconditions)
    assert not refused.value.retryable and (await client.get(CONFIG_MAPS, "owner"))["data"] == {"size": "4"}
    current = await client.get(CONFIG_MAPS, "owner")
    assert (
        await client.delete(
            CONFIG_MAPS,
            "owner",
            preconditions={
                "uid": current["metadata"]["uid"],
                "resourceVersion": current["metadata"]["resourceVersion"],
            },
        )
        is True
    )


async def test_a_wrong_token_is_unauthorized_after_one_credential_reload(sim, connection):
    broken = dict(connection)
    kubeconfig = dict(broken["kubeconfig"])
    kubeconfig["users"] = [{"name": user["name"], "user": {"token": "wrong"}} for user in kubeconfig["users"]]
    broken["kubeconfig"] = kubeconfig
    async with await KubeClient.connect(ConnectionSettings.from_dict(broken)) as client:
        with pytest.raises(errors.Unauthorized):
            await client.get(CONFIG_MAPS, "x")
        assert client.requests_sent == 2  # first try, then once more after reloading credentials


async def test_unreachable_server_is_a_retryable_transport_error(connection):
    kubeconfig = dict(connection["kubeconfig"])
    kubeconfig["clusters"] = [
        {"name": c["name"], "cluster": {"server": "http://127.0.0.1:9"}} for c in kubeconfig["clusters"]
    ]
    sleep = FakeSleep()
    settings = ConnectionSettings(kubeconfig=kubeconfig)
    async with await KubeClient.connect(settings, retry=RetryPolicy(attempts=3), sleep=sleep) as client:
        with pytest.raises(errors.TransportError) as raised:
            await client.get(PODS, "x")
    assert raised.value.retryable and len(sleep.calls) == 2
    assert isinstance(raised.value.__cause__, Exception)
