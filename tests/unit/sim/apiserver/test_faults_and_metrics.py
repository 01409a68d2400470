"""Fault injection (seeded errors, latency, watch cuts) and request metrics over HTTP."""

from __future__ import annotations

import pytest
import urllib3
import yaml

from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness


class Http:
    """A minimal HTTPS client for the emulator (token and CA from its kubeconfig)."""

    def __init__(self, harness: ClusterHarness) -> None:
        import base64

        document = yaml.safe_load(harness.kubeconfig_path.read_text())
        ca = base64.b64decode(document["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        self.pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=ca)
        self.url, self.token = harness.url, harness.token

    def request(self, method: str, path: str, body: dict | None = None) -> urllib3.BaseHTTPResponse:
        headers = {"Authorization": f"Bearer {self.token}"}
        return self.pool.request(method, self.url + path, json=body, headers=headers, timeout=10.0)

    def close(self) -> None:
        self.pool.clear()


@pytest.fixture
def http(emulator):
    client = Http(emulator)
    yield client
    client.close()


def test_spec_parsing():
    faults = Faults.parse("create:0.5:503,*:0.1:429,latency:0.02,watch-cut:3,seed:9")
    assert [(e.verb, e.rate, e.code) for e in faults.error_rates] == [("create", 0.5, 503), ("*", 0.1, 429)]
    assert (faults.latency_seconds, faults.watch_cut_seconds, faults.seed) == (0.02, 3.0, 9)
    for bad in ("create:2:503", "create:0.1:404", "bogus", "latency:x"):
        with pytest.raises(ValueError):
            Faults.parse(bad)


def test_same_seed_same_failures():
    def sequence() -> list[bool]:
        faults = Faults.parse("get:0.5:500,seed:3")
        return [faults.draw_error("get") is not None for _ in range(20)]

    first = sequence()
    assert first == sequence() and True in first and False in first


def test_injected_errors_are_status_responses_and_429_carries_retry_after(emulator, http):
    emulator.emulator.faults = Faults.parse("create:1:429")
    response = http.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    assert response.status == 429 and response.headers["Retry-After"] == "1"
    assert response.json()["reason"] == "TooManyRequests"
    emulator.emulator.faults = Faults.parse("create:1:503")
    assert http.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}}).status == 503
    assert http.request("GET", "/api/v1/namespaces/default/configmaps").status == 200
    assert emulator.run(lambda: emulator.store.list("v1/configmaps", "default")[0]) == []


def test_discovery_faults_answer_a_status_and_stop_after_their_count(emulator, http):
    http.request("PUT", "/_sim/faults", {"spec": "discovery/scheduling.k8s.io/v1beta1:1.0:503:count:1"})
    try:
        failed = http.request("GET", "/apis/scheduling.k8s.io/v1beta1")
        assert failed.status == 503 and failed.json()["reason"] == "ServiceUnavailable"
        assert http.request("GET", "/apis/batch/v1").status == 200
        assert http.request("GET", "/apis/scheduling.k8s.io/v1beta1").status == 200
    finally:
        http.request("DELETE", "/_sim/faults")


def test_faults_are_replaced_at_run_time_under_sim(emulator, http):
    response = http.request("PUT", "/_sim/faults", {"spec": "list:1:500,seed:1"})
    assert response.status == 200 and response.json()["errors"] == [{"verb": "list", "rate": 1.0, "code": 500}]
    assert http.request("GET", "/api/v1/namespaces").status == 500
    assert http.request("GET", "/apis").status == 200  # discovery is never faulted
    http.request("DELETE", "/_sim/faults")
    assert http.request("GET", "/api/v1/namespaces").status == 200
    assert http.request("PUT", "/_sim/faults", {"spec": "nonsense"}).status == 400


def test_watch_streams_are_cut(emulator, http):
    emulator.emulator.faults = Faults.parse("watch-cut:0.2")
    response = http.request("GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30")
    assert response.status == 200 and response.data == b""


def test_metrics_count_requests_per_verb_and_resource_and_reset(emulator, http):
    http.request("DELETE", "/_sim/metrics")
    http.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
    http.request("GET", "/api/v1/namespaces/default/configmaps/c")
    http.request("GET", "/api/v1/namespaces/default/configmaps/missing")
    http.request("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=0.1")
    http.request("GET", "/apis/autoscaling.x-k8s.io/v1/provisioningrequests")
    snapshot = http.request("DELETE", "/_sim/metrics").json()
    assert snapshot["requests"] == {
        "create": {"configmaps": 1},
        "get": {"configmaps": 2},
        "watch": {"configmaps": 1},
        "list": {"provisioningrequests.autoscaling.x-k8s.io": 1},
    }
    assert snapshot["codes"] == {"200": 3, "201": 1, "404": 1} and snapshot["total"] == 5
    assert http.request("GET", "/_sim/metrics").json()["total"] == 0
