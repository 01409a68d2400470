"""Injected faults over HTTPS, set through ``/_sim/faults``, as the provider's client, the Reflector,
the official ``kubernetes`` client and raw HTTP see them; and the ``/_sim/requests`` log."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS, PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.watch import Reflector
from gang_sim.apiserver.http import malformed
from gang_sim.testing import ClusterHarness
from tests.builders import config_map, pod, provisioning_request


class Http:
    """Raw HTTPS to the emulator (its token and CA); no retries, so every fault is seen as sent."""

    def __init__(self, harness: ClusterHarness) -> None:
        document = yaml.safe_load(harness.kubeconfig_path.read_text())
        ca = base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        self.pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca, retries=False)
        self.url, self.token = harness.url, harness.token

    def request(self, method: str, path: str, body: Any = None, **options: Any) -> urllib3.BaseHTTPResponse:
        headers = {"Authorization": f"Bearer {self.token}"}
        return self.pool.request(method, self.url + path, json=body, headers=headers, timeout=10.0, **options)

    def faults(self, spec: str) -> dict[str, Any]:
        response = self.request("PUT", "/_sim/faults", {"spec": spec})
        assert response.status == 200, response.data
        document: dict[str, Any] = response.json()
        return document

    def requests(self, method: str = "GET") -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.request(method, "/_sim/requests").json()
        return entries


class FakeSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        await asyncio.sleep(0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def http(emulator: ClusterHarness) -> Iterator[Http]:
    raw = Http(emulator)
    yield raw
    raw.pool.clear()


async def connect(harness: ClusterHarness, sleep: FakeSleep, attempts: int = 6) -> KubeClient:
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))
    policy = RetryPolicy(attempts=attempts, rng=random.Random(0))
    return await KubeClient.connect(settings, retry=policy, sleep=sleep, request_timeout=10.0)


async def until(snapshots: Any, predicate: Any, timeout: float = 10.0) -> Any:
    async def pull() -> Any:
        async for objects in snapshots:
            if predicate(objects):
                return objects
        raise AssertionError("the reflector stopped")

    return await asyncio.wait_for(pull(), timeout)


# -- errors per verb and resource, windows ----------------------------------------------------------


def test_errors_hit_only_the_named_verb_and_resource(http):
    document = http.faults("create/pods:1.0:503")
    assert document["errors"] == [{"verb": "create", "rate": 1.0, "code": 503, "resource": "pods"}]
    assert http.request("POST", "/api/v1/namespaces/default/configmaps", config_map("c")).status == 201
    assert http.request("POST", "/api/v1/namespaces/default/pods", pod("p")).status == 503
    assert http.request("GET", "/api/v1/namespaces/default/pods").status == 200
    assert http.request("GET", "/_sim/faults").json()["spec"] == "create/pods:1.0:503"


def test_a_count_window_fails_the_next_n_requests_then_serves(http):
    http.faults("create/configmaps:1.0:503:count:2")
    codes = [http.request("POST", "/api/v1/namespaces/default/configmaps", config_map("c")).status for _ in range(3)]
    assert codes == [503, 503, 201]


def test_a_for_window_runs_on_the_emulators_fault_clock(emulator, http):
    clock = FakeClock()
    emulator.run(lambda: setattr(emulator.emulator.context, "fault_clock", clock))
    http.faults("*:1.0:503:for:10")
    assert http.request("GET", "/api/v1/namespaces/default/configmaps").status == 503
    clock.now = 10.0
    assert http.request("GET", "/api/v1/namespaces/default/configmaps").status == 200


def test_bad_specs_are_rejected_naming_the_item(http):
    response = http.request("PUT", "/_sim/faults", {"spec": "create/pods:1.0:503,get:1.0:teapot"})
    assert response.status == 400
    assert "bad fault item 'get:1.0:teapot'" in response.json()["message"]
    response = http.request("PUT", "/_sim/faults", {"errors": [{"verb": "get", "rate": 1.0, "code": 418}]})
    assert response.status == 400 and "errors[0]" in response.json()["message"]
    assert http.request("GET", "/_sim/faults").json()["errors"] == []  # the faults in force are unchanged


# -- connection resets and drops --------------------------------------------------------------------


async def test_the_client_survives_one_reset_and_reports_a_retryable_transport_error_after_many(emulator, http):
    async with await connect(emulator, FakeSleep(), attempts=4) as kube:
        await kube.create(PODS, pod("a"))
        http.requests("DELETE")
        http.faults("list/pods:1.0:reset:count:1")
        items, _ = await kube.list(PODS)
        assert [item["metadata"]["name"] for item in items] == ["a"]
        http.faults("list/pods:1.0:reset:count:100")
        with pytest.raises(errors.TransportError) as raised:
            await kube.list(PODS)
    assert raised.value.retryable
    log = [(entry["verb"], entry["code"], entry["injected"]) for entry in http.requests()]
    assert log == [("list", 200, "reset"), ("list", 200, None)] + [("list", 200, "reset")] * 4


async def test_a_reset_create_has_taken_effect_so_its_retry_finds_the_object(emulator, http):
    http.faults("create/configmaps:1.0:reset:count:1")
    async with await connect(emulator, FakeSleep()) as kube:
        with pytest.raises(errors.AlreadyExists):
            await kube.create(CONFIG_MAPS, config_map("once"))
        assert (await kube.get(CONFIG_MAPS, "once"))["data"] == {"k": "v"}


async def test_a_dropped_request_has_no_effect_and_no_answer(emulator, http):
    http.faults("create/configmaps:1.0:drop:count:1")
    async with await connect(emulator, FakeSleep()) as kube:
        created = await kube.create(CONFIG_MAPS, config_map("dropped"))
    assert created["metadata"]["name"] == "dropped"
    creates = [entry for entry in http.requests() if entry["verb"] == "create"]
    assert [(entry["code"], entry["injected"]) for entry in creates] == [(None, "drop"), (201, None)]


def test_raw_clients_see_a_transport_error_not_a_status(http):
    http.faults("get/configmaps:1.0:reset,watch/configmaps:1.0:reset")
    http.request("POST", "/api/v1/namespaces/default/configmaps", config_map("c"))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        http.request("GET", "/api/v1/namespaces/default/configmaps/c")
    with pytest.raises(urllib3.exceptions.ProtocolError):  # pending ADDED events, then no chunked end
        http.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=5")


async def test_a_reset_watch_is_resumed_without_relisting(emulator, http):
    http.faults("watch/pods:1.0:reset:count:1")
    async with await connect(emulator, FakeSleep()) as kube:
        reflector = Reflector(kube, PODS, watch_timeout_seconds=60, sleep=FakeSleep())
        async with contextlib.aclosing(reflector.snapshots()) as snapshots:
            await anext(snapshots)
            await kube.create(PODS, pod("pending"))  # sent by the reset watch before its abort
            await until(snapshots, lambda objects: "pending" in objects)
            await kube.create(PODS, pod("after-reset"))
            await until(snapshots, lambda objects: "after-reset" in objects)
    assert (reflector.stats.lists, reflector.stats.relists) == (1, 0)
    assert reflector.stats.reconnects >= 1 and reflector.stats.watches >= 2
    watches = [entry["injected"] for entry in http.requests() if entry["verb"] == "watch"]
    assert watches[0] == "reset" and set(watches[1:]) == {None}


# -- malformed answers ------------------------------------------------------------------------------


def test_malformed_answers_leave_the_stored_objects_alone(emulator, http):
    http.request("POST", "/api/v1/namespaces/default/pods", pod("p"))
    http.faults("malformed/pods:no-status:count:1,malformed/pods:unknown-condition:count:1,malformed/pods:wrong-type")
    assert "status" not in http.request("GET", "/api/v1/namespaces/default/pods/p").json()
    items = http.request("GET", "/api/v1/namespaces/default/pods").json()["items"]
    assert items[0]["status"]["conditions"][-1]["type"] == malformed.UNKNOWN_CONDITION_TYPE
    watched = http.request("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=0.2").data
    event = json.loads(watched.splitlines()[0])
    assert event["type"] == "ADDED" and isinstance(event["object"]["status"]["conditions"], str)
    assert http.request("GET", "/api/v1/namespaces/default/configmaps").status == 200
    stored = emulator.run(lambda: emulator.store.get("v1/pods", "p", "default"))
    assert stored["status"]["phase"] == "Pending" and isinstance(stored["status"].get("conditions", []), list)
    injected = [entry["injected"] for entry in http.requests() if entry["resource"] == "pods"][1:]
    assert injected == ["malformed:no-status", "malformed:unknown-condition", "malformed:wrong-type"]


def test_the_official_client_reads_an_object_without_status(emulator, http):
    http.request("POST", "/api/v1/namespaces/default/pods", pod("p"))
    http.faults("malformed/pods:no-status")
    api = k8s_config.new_client_from_config(str(emulator.kubeconfig_path))
    try:
        listed = k8s.CoreV1Api(api).list_namespaced_pod("default")
    finally:
        api.close()
    assert [(item.metadata.name, item.status) for item in listed.items] == [("p", None)]


def test_a_truncated_watch_ends_cleanly_in_the_middle_of_a_line(http):
    http.request("POST", "/api/v1/namespaces/default/configmaps", config_map("c"))
    http.faults("malformed/configmaps:truncated-watch")
    assert "kind" in http.request("GET", "/api/v1/namespaces/default/configmaps/c").json()  # watches only
    response = http.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=5")
    assert response.status == 200 and response.data.startswith(b'{"type":"ADDED"')
    assert not response.data.endswith(b"\n")
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.data)


async def test_the_reflector_reconnects_after_a_truncated_event(emulator, http):
    http.faults("malformed/pods:truncated-watch:count:1")
    async with await connect(emulator, FakeSleep()) as kube:
        reflector = Reflector(kube, PODS, watch_timeout_seconds=60, sleep=FakeSleep())
        async with contextlib.aclosing(reflector.snapshots()) as snapshots:
            await anext(snapshots)
            await kube.create(PODS, pod("cut"))
            objects = await until(snapshots, lambda objects: "cut" in objects)
    assert objects["cut"]["status"]["phase"] == "Pending"  # the resumed watch delivered it whole
    assert (reflector.stats.lists, reflector.stats.relists, reflector.stats.reconnects) == (1, 0, 1)


# -- 410 on resume ----------------------------------------------------------------------------------


def test_a_resumed_watch_is_answered_410_expired_as_by_a_compacted_watch_cache(http):
    http.faults("watch-expire/configmaps:1.0")
    fresh = http.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=0.2")
    assert fresh.status == 200 and b"ERROR" not in fresh.data  # no resourceVersion: nothing to expire
    version = http.request("GET", "/api/v1/namespaces/default/configmaps").json()["metadata"]["resourceVersion"]
    resumed = http.request("GET", f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={version}")
    [event] = [json.loads(line) for line in resumed.data.splitlines()]
    assert resumed.status == 200 and event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    assert http.requests()[-1]["injected"] == "watch-expire"


async def test_the_reflector_relists_once_on_an_expired_resume(emulator, http):
    http.faults("watch-expire/pods:1.0:count:1")
    async with await connect(emulator, FakeSleep()) as kube:
        await kube.create(PODS, pod("before"))
        reflector = Reflector(kube, PODS, watch_timeout_seconds=60, sleep=FakeSleep())
        async with contextlib.aclosing(reflector.snapshots()) as snapshots:
            assert set(await anext(snapshots)) == {"before"}
            assert set(await anext(snapshots)) == {"before"}  # the relist's view
            await kube.create(PODS, pod("after"))
            await until(snapshots, lambda objects: "after" in objects)
    assert (reflector.stats.lists, reflector.stats.relists) == (2, 1)


# -- the request log --------------------------------------------------------------------------------


async def test_the_request_log_lists_a_clean_run_and_each_entry_is_a_fault_target(emulator, http):
    async with await connect(emulator, FakeSleep(), attempts=1) as kube:
        await kube.create(PROVISIONING_REQUESTS, provisioning_request("gang"))
        await kube.patch(PROVISIONING_REQUESTS, "gang", {"status": {"conditions": []}}, subresource="status")
        await kube.list(PODS)
        assert not await kube.delete(CONFIG_MAPS, "missing")
        pr = "autoscaling.x-k8s.io/provisioningrequests"
        clean = http.requests("DELETE")
        assert clean == [
            {
                "verb": "create",
                "resource": pr,
                "subresource": None,
                "namespace": "default",
                "name": None,
                "code": 201,
                "injected": None,
            },
            {
                "verb": "patch",
                "resource": pr,
                "subresource": "status",
                "namespace": "default",
                "name": "gang",
                "code": 200,
                "injected": None,
            },
            {
                "verb": "list",
                "resource": "pods",
                "subresource": None,
                "namespace": "default",
                "name": None,
                "code": 200,
                "injected": None,
            },
            {
                "verb": "delete",
                "resource": "configmaps",
                "subresource": None,
                "namespace": "default",
                "name": "missing",
                "code": 404,
                "injected": None,
            },
        ]
        assert http.requests() == []
        patch = clean[1]
        http.faults(f"{patch['verb']}/{patch['resource']}/{patch['subresource']}:1.0:503:count:1")
        await kube.get(PROVISIONING_REQUESTS, "gang")
        await kube.patch(PROVISIONING_REQUESTS, "gang", {"metadata": {"labels": {"a": "b"}}})
        with pytest.raises(errors.Unavailable):
            await kube.patch(PROVISIONING_REQUESTS, "gang", {"status": {"conditions": []}}, subresource="status")
    assert [(entry["verb"], entry["subresource"], entry["injected"]) for entry in http.requests()] == [
        ("get", None, None),
        ("patch", None, None),
        ("patch", "status", "error"),
    ]


def test_an_open_watch_is_logged_with_its_status_once_headers_are_sent(http):
    response = http.request("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=5", preload_content=False)
    try:
        assert response.status == 200
        assert http.requests()[-1] == {
            "verb": "watch",
            "resource": "pods",
            "subresource": None,
            "namespace": "default",
            "name": None,
            "code": 200,
            "injected": None,
        }
    finally:
        response.release_conn()
        response.close()


def test_a_reset_watch_refused_before_streaming_is_cut_too(http):
    http.faults("watch:1.0:reset")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        http.request("GET", "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true")
    assert http.requests()[-1]["code"] == 422 and http.requests()[-1]["injected"] == "reset"
