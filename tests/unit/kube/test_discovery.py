"""Prechecks against the emulator: served kinds (discovery) and SelfSubjectAccessReview."""

from __future__ import annotations

import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.discovery import can_i, is_served, served_plurals
from airflow_provider_gang.kube.resources import PODS, PROVISIONING_REQUESTS, WORKLOADS, Resource
from airflow_provider_gang.kube.settings import ConnectionSettings
from gang_sim.apiserver.http.auth import Rule


async def test_served_kinds_come_from_discovery(sim, client):
    assert await is_served(client, PODS)
    assert await is_served(client, PROVISIONING_REQUESTS)
    assert await is_served(client, WORKLOADS)
    assert not await is_served(client, Resource("example.com", "v1", "widgets", "Widget"))
    assert not await is_served(client, Resource("kueue.x-k8s.io", "v1", "workloads", "Workload"))
    core = await served_plurals(client, "v1")
    assert "pods" in core and "pods/status" not in core


async def test_access_review_answers_for_the_callers_own_rules(sim, client):
    # No SelfSubjectAccessReview rule: every user may create them (ClusterRole system:basic-user).
    rules = [Rule.parse("get,list,watch:*:*")]
    _, path = sim.harness.add_user("reader", rules)
    settings = ConnectionSettings(kubeconfig=yaml.safe_load(path.read_text()))
    async with await KubeClient.connect(settings) as reader:
        allowed = await can_i(reader, "watch", PROVISIONING_REQUESTS)
        denied = await can_i(reader, "create", PROVISIONING_REQUESTS)
    assert allowed.allowed and not denied.allowed
    assert (await can_i(client, "delete", PODS)).allowed
