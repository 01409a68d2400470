"""The kubelet's local-process runtime: real subprocesses with the pod's env, logs through the API,
loopback pod IPs, headless-Service hostnames resolvable between pods, SIGTERM on delete."""

from __future__ import annotations

import socket
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import torch  # noqa: F401  # the DDP test's pods import it: a test dependency, a broken install fails here

from gang_sim.testing.eventually import eventually
from gang_sim.testing.pytest_plugin import SimCluster
from tests.builders import pod
from tests.integration.control_plane.conftest import exits_on_sigterm, gpu_scenario

IMAGE = "python:3.11"
CPU_POOL = {"name": "cpu", "zone": "us-central1-a", "minNodes": 1, "maxNodes": 1}


def _scenario() -> Any:
    return gpu_scenario(pool={"maxNodes": 0}, extra_pools=[CPU_POOL], localProcessImages=[IMAGE])


def _free_port() -> int:
    # Processes share the host network: pick a port no other job on this machine is using.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _python_pod(name: str, code: str, port: int = 0, **spec: Any) -> dict[str, Any]:
    return pod(
        name,
        labels={"app": "trainer"},
        annotations={"rank": name[-1]},
        spec={
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "command": [sys.executable, "-c", textwrap.dedent(code)],
                    "env": [
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['rank']"}}},
                        {"name": "MASTER_ADDR", "value": "trainer-0.trainer"},
                        {"name": "MASTER_PORT", "value": str(port)},
                    ],
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
            **spec,
        },
    )


def _create_headless_service(cluster: SimCluster) -> None:
    """The headless Service ``trainer`` selecting ``app=trainer``: its pods' hostnames resolve."""
    spec = {"clusterIP": "None", "selector": {"app": "trainer"}, "ports": [{"port": 29500}]}
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "trainer"}, "spec": spec}
    cluster.core.create_namespaced_service("default", body)


def _log(cluster: SimCluster, name: str) -> str:
    # kubernetes 36 returns str(bytes) for text bodies; read the raw response instead.
    response = cluster.core.read_namespaced_pod_log(name, "default", _preload_content=False)
    return str(response.data.decode())


def _wait_for_phase(cluster: SimCluster, name: str, phases: set[str], timeout: float = 30.0) -> Any:
    def reached() -> Any:
        pod = cluster.core.read_namespaced_pod(name, "default")
        assert pod.status.phase in phases, f"{name} is {pod.status.phase}"
        return pod

    return eventually(reached, timeout=timeout, what=f"{name} to be {' or '.join(sorted(phases))}")


def test_process_gets_the_pod_env_and_its_output_is_the_pod_log(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_scenario())
    cluster.core.create_namespaced_pod(
        "default",
        _python_pod(
            "worker-3",
            """
        import os, sys
        print("name", os.environ["POD_NAME"], "rank", os.environ["RANK"], "ip", os.environ["POD_IP"])
        sys.exit(3)
    """,
        ),
    )
    pod = _wait_for_phase(cluster, "worker-3", {"Failed", "Succeeded"})
    assert pod.status.phase == "Failed"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 3
    log = _log(cluster, "worker-3")
    assert log.strip() == f"name worker-3 rank 3 ip {pod.status.pod_ip}"


def test_a_log_line_of_any_length_is_kept_whole(sim_cluster: Callable[..., SimCluster]) -> None:
    """A real kubelet joins the runtime's 16 KiB pieces of a long line when the log is read; the
    emulator keeps the line whole (``@task.gang`` writes rank 0's return value on one line)."""
    cluster = sim_cluster(_scenario())
    code = """
        import sys
        sys.stdout.write("start\\n" + "x" * (3 * 1024 * 1024) + "\\nend")
    """
    cluster.core.create_namespaced_pod("default", _python_pod("long-0", code))
    pod = _wait_for_phase(cluster, "long-0", {"Failed", "Succeeded"})
    assert pod.status.phase == "Succeeded"
    assert _log(cluster, "long-0").splitlines() == ["start", "x" * (3 * 1024 * 1024), "end"]


def test_pods_behind_a_headless_service_reach_each_other_by_hostname(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_scenario())
    _create_headless_service(cluster)
    server = """
        import os, socket
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's TCPStore does
        listener.bind(("0.0.0.0", int(os.environ["MASTER_PORT"])))  # narrowed to the pod IP
        listener.listen(1)
        connection, _ = listener.accept()
        connection.sendall(b"hello from rank 0 on " + socket.gethostname().encode())
        connection.close()
    """
    client = """
        import os, socket, time
        master = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
        for _ in range(200):
            try:
                connection = socket.create_connection(master, timeout=5)
                break
            except OSError:
                time.sleep(0.05)
        print(socket.gethostbyname(os.environ["MASTER_ADDR"]), connection.recv(100).decode())
    """
    port = _free_port()
    cluster.core.create_namespaced_pod(
        "default", _python_pod("trainer-0", server, port, hostname="trainer-0", subdomain="trainer")
    )
    cluster.core.create_namespaced_pod(
        "default", _python_pod("trainer-1", client, port, hostname="trainer-1", subdomain="trainer")
    )
    first = _wait_for_phase(cluster, "trainer-0", {"Succeeded", "Failed"})
    second = _wait_for_phase(cluster, "trainer-1", {"Succeeded", "Failed"})
    assert (first.status.phase, second.status.phase) == ("Succeeded", "Succeeded")
    assert first.status.pod_ip != second.status.pod_ip
    log = _log(cluster, "trainer-1").strip()
    assert log == f"{first.status.pod_ip} hello from rank 0 on trainer-0"


NATIVE_LOOKUP = """
    import ctypes, os, socket, time

    libc = ctypes.CDLL(None)  # the process's libc symbols: what native code such as torch's C++ calls

    class AddrInfo(ctypes.Structure):
        pass

    AddrInfo._fields_ = [("flags", ctypes.c_int), ("family", ctypes.c_int), ("socktype", ctypes.c_int),
                         ("protocol", ctypes.c_int), ("addrlen", ctypes.c_uint32), ("addr", ctypes.c_void_p),
                         ("canonname", ctypes.c_char_p), ("next", ctypes.POINTER(AddrInfo))]

    def native_ipv4(name):
        hints = AddrInfo(family=socket.AF_INET, socktype=socket.SOCK_STREAM)
        found = ctypes.POINTER(AddrInfo)()
        for _ in range(100):  # a peer's name is known once its pod has an IP
            if libc.getaddrinfo(name.encode(), None, ctypes.byref(hints), ctypes.byref(found)) == 0:
                address = ctypes.string_at(found.contents.addr, 8)[4:8]  # sockaddr_in.sin_addr
                libc.freeaddrinfo(found)
                return socket.inet_ntoa(address)
            time.sleep(0.1)
        return "unresolved"

    buffer = ctypes.create_string_buffer(256)
    libc.gethostname(buffer, 256)
    names = [os.environ["PEER"], os.environ["PEER"] + ".default.svc.cluster.local", buffer.value.decode()]
    print(" ".join([buffer.value.decode(), *(native_ipv4(name) for name in names)]))
"""


def test_native_code_resolves_pod_hostnames(sim_cluster: Callable[..., SimCluster]) -> None:
    # libc getaddrinfo/gethostname called directly (ctypes), bypassing Python's socket module and its shim.
    cluster = sim_cluster(_scenario())
    _create_headless_service(cluster)
    for rank in (0, 1):
        body = _python_pod(f"trainer-{rank}", NATIVE_LOOKUP, hostname=f"trainer-{rank}", subdomain="trainer")
        body["spec"]["containers"][0]["env"].append({"name": "PEER", "value": f"trainer-{1 - rank}.trainer"})
        cluster.core.create_namespaced_pod("default", body)
    pods = [_wait_for_phase(cluster, f"trainer-{rank}", {"Succeeded", "Failed"}) for rank in (0, 1)]
    assert [pod.status.phase for pod in pods] == ["Succeeded", "Succeeded"]
    ips = [pod.status.pod_ip for pod in pods]
    for rank in (0, 1):
        peer_ip, own_ip = ips[1 - rank], ips[rank]
        assert _log(cluster, f"trainer-{rank}").split() == [f"trainer-{rank}", peer_ip, peer_ip, own_ip]


def test_deleting_the_pod_terminates_the_process(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_scenario())
    cluster.core.create_namespaced_pod("default", _python_pod("sleeper-0", exits_on_sigterm("got SIGTERM")))
    _wait_for_phase(cluster, "sleeper-0", {"Running"})
    eventually(lambda: "ready" in _log(cluster, "sleeper-0"), timeout=20, what="sleeper-0 ready")
    runtime = cluster.harness.control.running.controllers[1].processes  # type: ignore[union-attr, attr-defined]
    (process,) = next(iter(runtime.pods.values())).processes.values()
    cluster.core.delete_namespaced_pod("sleeper-0", "default")
    eventually(lambda: process.returncode is not None, timeout=20, what="the process to end with its pod")
    assert process.returncode == 0  # it handled SIGTERM within the grace period


def test_container_without_command_fails_to_start(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_scenario())
    body = _python_pod("no-command", "")
    del body["spec"]["containers"][0]["command"]
    cluster.core.create_namespaced_pod("default", body)
    pod = _wait_for_phase(cluster, "no-command", {"Failed"})
    terminated = pod.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (128, "StartError")


def test_torch_ddp_rendezvous_between_pods(sim_cluster: Callable[..., SimCluster]) -> None:
    cluster = sim_cluster(_scenario())
    _create_headless_service(cluster)
    # torch resolves MASTER_ADDR in C++ (getaddrinfo), so this needs the LD_PRELOAD resolver shim.
    train = """
        import os
        from datetime import timedelta
        import torch
        import torch.distributed as dist
        rank = int(os.environ["RANK"])
        dist.init_process_group("gloo", rank=rank, world_size=2, timeout=timedelta(seconds=60),
                                init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
        value = torch.tensor([rank + 1.0])
        dist.all_reduce(value)
        print("rank", rank, "sum", value.item(), flush=True)
        dist.destroy_process_group()
    """
    port = _free_port()
    for rank in (0, 1):
        cluster.core.create_namespaced_pod(
            "default", _python_pod(f"trainer-{rank}", train, port, hostname=f"trainer-{rank}", subdomain="trainer")
        )
    for rank in (0, 1):
        pod = _wait_for_phase(cluster, f"trainer-{rank}", {"Succeeded", "Failed"}, timeout=90)
        assert pod.status.phase == "Succeeded", _log(cluster, f"trainer-{rank}")
        assert _log(cluster, f"trainer-{rank}").strip().endswith(f"rank {rank} sum 3.0")
