"""Name resolution for the local-process runtime: pod and headless-Service names -> pod IPs.

All local processes share the host's resolver, so simulated cluster DNS is provided per process by two
shims (:mod:`.resolver_shims`), both reading files this module rewrites (atomically) whenever pods or
Services change:

- ``sitecustomize.py`` (first on ``PYTHONPATH``): patches Python's ``socket.getaddrinfo``,
  ``gethostbyname``, ``gethostbyname_ex`` and ``gethostname``, and narrows Python wildcard binds to
  the pod IP. Covers every Python-level lookup of a Python process.
- ``libgangsimhosts.so`` (``LD_PRELOAD``), compiled once per runtime with ``cc``/``gcc`` when one is
  on ``PATH`` (:attr:`Resolver.library` is None otherwise): interposes libc ``getaddrinfo``,
  ``gethostbyname``, ``gethostbyname2``, ``gethostbyname_r``, ``gethostbyname2_r`` and ``gethostname``
  for every dynamically linked program the pod runs (Python's own C code, torch's C++ c10d
  ``TCPStore`` and gloo, ``getent``, ``curl`` ...), because their calls go through the dynamic
  linker. Verified with libc ``getaddrinfo`` through ``ctypes`` and a torch ``TCPStore`` client
  connecting to ``MASTER_ADDR=<hostname>.<subdomain>`` (``tests/integration/control_plane/
  test_local_processes.py``). Not covered: statically linked binaries, programs that speak DNS
  themselves (Go's pure resolver, c-ares, ``dig``/``nslookup``), ``getaddrinfo_a`` and
  ``gethostbyaddr`` (reverse lookups), and set-uid programs (the loader ignores ``LD_PRELOAD``).

Names, for each pod with ``hostname`` + ``subdomain`` selected by a headless Service (``clusterIP: None``)
named ``subdomain``: ``<hostname>.<subdomain>``, ``<subdomain>`` (the first such pod) and both with the
suffixes ``.<namespace>``, ``.<namespace>.svc``, ``.<namespace>.svc.cluster.local``. Short names resolve
only in the pod's own namespace, like the DNS search path of a real pod. Each process also resolves its
own pod hostname to its pod IP and gets it from ``gethostname()`` (the pod's ``/etc/hosts`` and UTS
name), so gloo, which binds to what its hostname resolves to, uses the pod IP as on a real cluster.
A name is known once its pod has an IP; lookups before that fail like a missing DNS record and a
retry succeeds (torch's ``TCPStore`` client retries until its timeout).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gang_sim.controllers.kubelet.resolver_shims import C_SHIM, PYTHON_SHIM

Obj = dict[str, Any]
_log = logging.getLogger(__name__)


def hosts_table(pods: list[Obj], services: list[Obj], pod_ips: dict[str, str]) -> dict[str, Any]:
    """The ``GANG_SIM_HOSTS`` document: ``{"fqdn": {name: ip}, "short": {namespace: {name: ip}}}``."""
    fqdn: dict[str, str] = {}
    short: dict[str, dict[str, str]] = {}
    headless = {
        (service["metadata"]["namespace"], service["metadata"]["name"]): service
        for service in services
        if (service.get("spec") or {}).get("clusterIP") == "None"
    }
    for pod in sorted(pods, key=lambda item: item["metadata"]["name"]):
        metadata, spec = pod["metadata"], pod.get("spec") or {}
        ip = pod_ips.get(metadata.get("uid", ""))
        subdomain = spec.get("subdomain")
        service = headless.get((metadata["namespace"], subdomain or ""))
        if ip is None or service is None:
            continue
        selector = (service.get("spec") or {}).get("selector") or {}
        labels = metadata.get("labels") or {}
        if not selector or any(labels.get(key) != value for key, value in selector.items()):
            continue
        namespace = metadata["namespace"]
        names = short.setdefault(namespace, {})
        for base in (f"{_pod_hostname(pod)}.{subdomain}", str(subdomain)):
            names.setdefault(base, ip)
            for suffix in (namespace, f"{namespace}.svc", f"{namespace}.svc.cluster.local"):
                fqdn.setdefault(f"{base}.{suffix}", ip)
    return {"fqdn": fqdn, "short": short}


def _pod_hostname(pod: Obj) -> str:
    spec = pod.get("spec") or {}
    return str(spec.get("hostname") or pod["metadata"]["name"])[:63]


class Resolver:
    """The shim files of one runtime directory and the environment that activates them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (directory / "sitecustomize.py").write_text(PYTHON_SHIM, encoding="utf-8")
        self.json_path = directory / "hosts.json"
        self.library = self._compile()
        self._written = ""
        self.update([], [], {})

    def _compile(self) -> Path | None:
        """Build the native shim; None (with a warning) when no compiler is found or it fails."""
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            _log.warning("no C compiler on PATH: local processes resolve pod names in Python only")
            return None
        source, library = self.directory / "gangsimhosts.c", self.directory / "libgangsimhosts.so"
        source.write_text(C_SHIM, encoding="utf-8")
        try:
            subprocess.run(
                [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source), "-ldl"],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except subprocess.CalledProcessError as error:
            _log.warning("could not compile the native resolver shim (Python-only name resolution): %s", error.stderr)
            return None
        except (OSError, subprocess.SubprocessError) as error:
            _log.warning("could not compile the native resolver shim (Python-only name resolution): %s", error)
            return None
        return library

    def hosts_file(self, namespace: str) -> Path:
        return self.directory / f"hosts-{namespace}.txt"

    def update(self, pods: list[Obj], services: list[Obj], pod_ips: dict[str, str]) -> None:
        table = hosts_table(pods, services, pod_ips)
        text = json.dumps(table, sort_keys=True)
        if text == self._written:
            return
        _replace(self.json_path, text)
        namespaces = {pod["metadata"]["namespace"] for pod in pods} | set(table["short"])
        for namespace in namespaces:
            names = {**table["fqdn"], **table["short"].get(namespace, {})}
            _replace(self.hosts_file(namespace), "".join(f"{ip} {name}\n" for name, ip in sorted(names.items())))
        self._written = text

    def environment(self, namespace: str, inherited_pythonpath: str = "") -> dict[str, str]:
        env = {
            "GANG_SIM_HOSTS": str(self.json_path),
            "GANG_SIM_HOSTS_FILE": str(self.hosts_file(namespace)),
            "GANG_SIM_NAMESPACE": namespace,
            "PYTHONPATH": ":".join(filter(None, [str(self.directory), inherited_pythonpath])),
        }
        if self.library is not None:
            env["LD_PRELOAD"] = str(self.library)
        return env


def _replace(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)  # atomic: readers never see a partial file
