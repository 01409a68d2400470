"""Simulated cluster DNS for local processes: the hosts table and the files the shims read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gang_sim.controllers.kubelet.resolver import Resolver, hosts_table


def _pod(
    name: str,
    uid: str,
    *,
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    subdomain: str | None = "trainer",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"hostname": name}
    if subdomain:
        spec["subdomain"] = subdomain
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels or {"app": "t"}},
        "spec": spec,
    }


SERVICE = {"metadata": {"name": "trainer", "namespace": "ml"}, "spec": {"clusterIP": "None", "selector": {"app": "t"}}}
IPS = {"u0": "127.9.0.2", "u1": "127.9.0.3", "u2": "127.9.0.4", "u3": "127.9.0.5"}


def test_hosts_table_covers_headless_service_members_only() -> None:
    pods = [
        _pod("trainer-0", "u0"),
        _pod("trainer-1", "u1"),
        _pod("other", "u2", labels={"app": "other"}),  # not selected by the Service
        _pod("loner", "u3", subdomain=None),  # no subdomain
    ]
    table = hosts_table(pods, [SERVICE], IPS)
    assert table["short"] == {
        "ml": {"trainer": "127.9.0.2", "trainer-0.trainer": "127.9.0.2", "trainer-1.trainer": "127.9.0.3"}
    }
    assert table["fqdn"]["trainer-1.trainer.ml.svc.cluster.local"] == "127.9.0.3"
    assert table["fqdn"]["trainer.ml.svc"] == "127.9.0.2"
    assert not any(name.startswith(("other", "loner")) for name in table["fqdn"])


def test_a_service_with_cluster_ip_gives_no_pod_names() -> None:
    service = {**SERVICE, "spec": {"clusterIP": "10.0.0.1", "selector": {"app": "t"}}}
    assert hosts_table([_pod("trainer-0", "u0")], [service], IPS) == {"fqdn": {}, "short": {}}


def test_shims_resolve_names_in_a_child_process(tmp_path: Path) -> None:
    resolver = Resolver(tmp_path)
    resolver.update([_pod("trainer-0", "u0")], [SERVICE], IPS)
    assert "127.9.0.2 trainer-0.trainer\n" in resolver.hosts_file("ml").read_text()
    env = {**os.environ, **resolver.environment("ml")}
    code = "import socket; print(socket.gethostbyname('trainer-0.trainer'), socket.gethostbyname('trainer.ml.svc'))"
    output = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert output.stdout.split() == ["127.9.0.2", "127.9.0.2"]
    if shutil.which("cc") or shutil.which("gcc"):  # native code (getent uses libc getaddrinfo) resolves too
        assert resolver.library is not None, "the native resolver shim did not compile"
        native = subprocess.run(
            ["getent", "ahostsv4", "trainer-0.trainer"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert native.stdout.split()[:1] == ["127.9.0.2"]


def test_native_shim_answers_the_pods_own_hostname_and_gethostname(tmp_path: Path) -> None:
    # A real pod's /etc/hosts maps its hostname to its IP, and gethostname() is the pod hostname.
    resolver = Resolver(tmp_path)
    if resolver.library is None:
        assert not (shutil.which("cc") or shutil.which("gcc")), "the native resolver shim did not compile"
        return
    resolver.update([_pod("trainer-0", "u0")], [SERVICE], IPS)
    env = {**os.environ, **resolver.environment("ml"), "HOSTNAME": "trainer-1", "GANG_SIM_POD_IP": "127.9.0.3"}

    def native(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert native("hostname").stdout.strip() == "trainer-1"
    assert native("getent", "ahostsv4", "trainer-1").stdout.split()[:1] == ["127.9.0.3"]
    # gethostbyname2 (getent hosts): case-insensitive, trailing dot ignored
    assert native("getent", "hosts", "TRAINER-0.trainer.ml.svc.cluster.local.").stdout.split()[:1] == ["127.9.0.2"]
    missing = native("getent", "ahostsv4", "trainer-7.trainer")
    assert missing.returncode == 2 and missing.stdout == ""
