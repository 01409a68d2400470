"""Backoff curve, connection settings round trip and URL layout (pure parts of kube/)."""

from __future__ import annotations

import random

import pytest

from airflow_provider_gang.kube.resources import CLUSTER_QUEUES, PODS, PROVISIONING_REQUESTS, by_key
from airflow_provider_gang.kube.retry import RetryPolicy
from airflow_provider_gang.kube.settings import ConnectionSettings


def test_backoff_grows_exponentially_within_jittered_bounds_and_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, rng=random.Random(7))
    for failures, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = [policy.delay(failures) for _ in range(200)]
        assert all(0.0 <= delay <= ceiling for delay in delays)
        assert max(delays) > ceiling / 2  # full jitter spreads over the whole interval


def test_backoff_after_hours_of_failures_stays_at_the_cap():
    policy = RetryPolicy(base_delay=0.01, max_delay=0.05, rng=random.Random(3))
    assert all(0.0 <= policy.delay(failures) <= 0.05 for failures in (1030, 10**6))


def test_retry_after_is_a_floor_but_never_above_the_cap():
    policy = RetryPolicy(base_delay=0.1, max_delay=10.0, rng=random.Random(1))
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(1, retry_after=600.0) == 10.0


def test_connection_settings_round_trip_through_plain_values():
    kubeconfig = {"apiVersion": "v1", "clusters": [], "users": [], "contexts": []}
    settings = ConnectionSettings(kubeconfig=kubeconfig, context="ctx", namespace="ml", verify_ssl=False)
    assert ConnectionSettings.from_dict(settings.to_dict()) == settings
    assert ConnectionSettings.from_dict(ConnectionSettings(in_cluster=True).to_dict()).in_cluster


@pytest.mark.parametrize("arguments", [{}, {"in_cluster": True, "kubeconfig": {"clusters": []}}], ids=["none", "both"])
def test_connection_settings_need_exactly_one_source(arguments):
    with pytest.raises(ValueError, match="exactly one"):
        ConnectionSettings(**arguments)


def test_resource_paths_follow_the_api_layout():
    assert PODS.path("ns", "p-0", "status") == "/api/v1/namespaces/ns/pods/p-0/status"
    assert PROVISIONING_REQUESTS.path("ns") == "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests"
    assert CLUSTER_QUEUES.path(name="cq") == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"
    assert by_key("autoscaling.x-k8s.io/v1/provisioningrequests") is PROVISIONING_REQUESTS
    with pytest.raises(ValueError, match="namespace"):
        PODS.path()
