"""Exec credential plugins (how GKE and EKS authenticate) through kubernetes_asyncio's loader, and a
token rotated during a long watch: 401, credentials reloaded (the plugin runs again), watch resumed."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap

import yaml

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.kube.watch import Reflector
from gang_sim.apiserver.http.auth import ALLOW_ALL
from gang_sim.testing.eventually import eventually_async
from tests.builders import pod

PLUGIN = textwrap.dedent(
    """
    import json, sys
    token = open(sys.argv[1]).read().strip()
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                      "status": {"token": token}}))
    """
)


def exec_kubeconfig(sim, tmp_path, token: str) -> tuple[dict[str, object], object]:
    plugin, token_file = tmp_path / "plugin.py", tmp_path / "token"
    plugin.write_text(PLUGIN)
    token_file.write_text(token)
    kubeconfig = yaml.safe_load(sim.harness.kubeconfig_path.read_text())
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(plugin), str(token_file)],
        "interactiveMode": "Never",
    }
    kubeconfig["users"] = [{"name": user["name"], "user": {"exec": exec_user}} for user in kubeconfig["users"]]
    return kubeconfig, token_file


def rotate(sim, old: str, new: str) -> None:
    """The identity provider issues ``new`` and the API server stops accepting ``old``."""
    authorizer = sim.harness.emulator.authorizer
    sim.harness.run(lambda: authorizer._users_by_token.pop(old))  # test-only: revoke a token
    sim.harness.run(lambda: authorizer.add_user("rotating", ALLOW_ALL, token=new))


async def test_a_rotated_exec_token_is_picked_up_by_a_running_watch(sim, client, tmp_path):
    sim.harness.run(lambda: sim.harness.emulator.authorizer.add_user("rotating", ALLOW_ALL, token="token-a"))
    kubeconfig, token_file = exec_kubeconfig(sim, tmp_path, "token-a")
    sim.set_faults("watch-cut:0.3")
    async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as watcher:
        reflector = Reflector(watcher, PODS, watch_timeout_seconds=60)
        async with contextlib.aclosing(reflector.snapshots()) as snapshots:
            assert await anext(snapshots) == {}
            token_file.write_text("token-b")
            rotate(sim, "token-a", "token-b")
            pulled = asyncio.ensure_future(anext(snapshots))
            # Past a cut the watch reopens, gets 401, reloads the token and reopens.
            await eventually_async(
                lambda: sim.metrics()["codes"].get("401", 0) >= 1, timeout=0.6, what="a 401 for the rotated token"
            )
            await client.create(PODS, pod("after-rotation"))
            objects = await asyncio.wait_for(pulled, 10)
        assert set(objects) == {"after-rotation"}
        assert reflector.stats.relists == 0
        assert (await watcher.get(PODS, "after-rotation"))["metadata"]["name"] == "after-rotation"
