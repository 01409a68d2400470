"""The emulator's API server killed and served again (:meth:`Emulator.restart`): what the contract suite
cannot show on both backends - a write in flight at the kill gets no answer, and one killed before
the server read its body has no effect; a restart is refused before the server started. The rest
(objects, versions, 410, refused connections) is the contract test
``tests/contract/test_apiserver_restart.py``, on the real control plane too."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import threading
import urllib.parse

import pytest

from gang_sim.apiserver.server import Emulator
from gang_sim.testing import ClusterHarness


def post_config_map(cluster: ClusterHarness, name: str) -> str:
    """POST a ConfigMap with the admin's token; the status, or the transport error's name."""
    context = ssl.create_default_context(cadata=cluster.emulator.ca_pem.decode())  # type: ignore[union-attr]
    address = urllib.parse.urlsplit(cluster.url)
    connection = http.client.HTTPSConnection(address.hostname or "", address.port, context=context, timeout=20)
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    headers = {"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"}
    try:
        connection.request("POST", "/api/v1/namespaces/default/configmaps", body, headers)
        return str(connection.getresponse().status)
    except (OSError, http.client.HTTPException) as error:
        return type(error).__name__
    finally:
        connection.close()


def test_a_write_in_flight_at_the_kill_gets_no_answer_and_takes_no_effect_before_it_was_read() -> None:
    # Every request waits a second before its body is read: the kill comes in that second.
    with ClusterHarness(faults="latency:1") as cluster:
        answer: list[str] = []
        writer = threading.Thread(target=lambda: answer.append(post_config_map(cluster, "in-flight")))
        writer.start()
        cluster.run(lambda: asyncio.sleep(0.3))
        url = cluster.url
        cluster.restart_api_server(down_seconds=0.5)
        writer.join(20)
        assert answer and not answer[0].isdigit(), f"the write was answered: {answer}"
        assert cluster.url == url
        cluster.run(lambda: asyncio.sleep(1.0))  # the handler's second is over: it met the lost connection
        assert cluster.objects("v1/configmaps") == []
        assert post_config_map(cluster, "after") == "201"
        assert [obj["metadata"]["name"] for obj in cluster.objects("v1/configmaps")] == ["after"]


def test_a_restart_before_the_start_is_refused() -> None:
    emulator = Emulator()
    with pytest.raises(RuntimeError, match="not started"):
        asyncio.run(emulator.restart())
