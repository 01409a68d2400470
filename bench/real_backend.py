"""The real control plane as a backend of ``bench/launch.py`` and ``bench/triggerer_load.py``.

:func:`real_cluster` starts :class:`~airflow_provider_gang.sim.testing.real.RealCluster` (etcd,
kube-apiserver 1.37.2, kube-controller-manager, kube-scheduler and kwok, from ``make real-cluster``)
without the cluster-autoscaler - the benchmarks write the grants themselves - and, when Kueue is left
out, installs the ProvisioningRequest CRD that Kueue's start would have installed.

:class:`ApiserverMetrics` reads the apiserver's request counters, the real counterpart of the
emulator's ``/_sim/metrics``. The real apiserver has no per-client counter: ``apiserver_request_total``
(``k8s.io/apiserver/pkg/endpoints/metrics/metrics.go``) is labelled by verb, group, version, resource,
subresource, scope, component and code, and is incremented when a request *completes* - a WATCH is
counted when it ends, and ``apiserver_longrunning_requests`` gauges the ones still open. So the
figures of the measured process are the *reads* (GET, LIST, WATCH) of the kinds a waiting gang is made
of; the control plane's own requests in the same window (its writes, leases, events and discovery)
are reported apart as ``background``. Watches of the control plane's informers on those kinds stay
open for 30 to 60 minutes (``--min-request-timeout``), longer than any window measured here; the
open watches are counted against those open before the triggers start, so a monitor the garbage
collector opens meanwhile on a newly installed CRD (it rediscovers resources every 30 s,
``kube-controller-manager`` ``garbagecollector.Sync``) adds one.
"""

from __future__ import annotations

import base64
import contextlib
import re
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from airflow_provider_gang.sim.testing.real import RealCluster
from airflow_provider_gang.sim.world.scenario import Scenario

READ_VERBS = frozenset({"get", "list", "watch"})
GANG_RESOURCES = frozenset(
    {
        "configmaps",
        "events",
        "events.events.k8s.io",
        "podtemplates",
        "pods",
        "provisioningrequests.autoscaling.x-k8s.io",
        "workloads.kueue.x-k8s.io",
    }
)
"""The kinds a waiting gang (or the anchor's pods) is made of, named as the emulator's metrics name them,
and the Events the anchor's ``KubernetesPodTrigger`` reads (cncf-kubernetes ``watch_pod_events``); the
control plane only writes Events."""

_SAMPLE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
_LABEL = re.compile(r'(?P<key>[a-z_]+)="(?P<value>[^"]*)"')


@contextlib.contextmanager
def real_cluster(scenario: Scenario, *, kueue: bool) -> Iterator[RealCluster]:
    """A started real control plane for ``scenario`` (the ProvisioningRequest CRD installed, with or
    without Kueue), no cluster-autoscaler; stopped on exit."""
    with RealCluster(scenario, kueue=kueue, autoscaler=False) as cluster:
        yield cluster


def resource_name(labels: dict[str, str]) -> str:
    """``pods``, ``pods/status``, ``provisioningrequests.autoscaling.x-k8s.io``: the emulator's naming
    (RBAC's) for the resource of one ``apiserver_request_total`` sample."""
    name = labels.get("resource", "")
    if labels.get("group"):
        name = f"{name}.{labels['group']}"
    if labels.get("subresource"):
        name = f"{name}/{labels['subresource']}"
    return name


def parse_samples(text: str, metric: str) -> dict[tuple[str, str], float]:
    """The samples of ``metric`` in Prometheus text exposition ``text``, summed by (lower-case verb,
    resource name); samples without a resource (discovery, ``/openapi``) are named by their path kind."""
    sums: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match["name"] != metric:
            continue
        labels = {label["key"]: label["value"] for label in _LABEL.finditer(match["labels"])}
        key = (labels.get("verb", "").lower(), resource_name(labels) or "(non-resource)")
        sums[key] = sums.get(key, 0.0) + float(match["value"])
    return sums


def is_measured(verb: str, resource: str) -> bool:
    """A request the measured process makes: a read of a kind a waiting gang is made of."""
    return verb in READ_VERBS and resource in GANG_RESOURCES


def delta_report(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict[str, Any]:
    """The requests completed between two readings, in ``/_sim/metrics``'s shape (``total``,
    ``requests`` by verb then resource), plus ``background``: the other requests, not the process's."""
    by_verb: dict[str, dict[str, int]] = {}
    total = background = 0
    for (verb, resource), value in sorted(after.items()):
        number = round(value - before.get((verb, resource), 0.0))
        if number <= 0:
            continue
        if is_measured(verb, resource):
            by_verb.setdefault(verb, {})[resource] = number
            total += number
        else:
            background += number
    return {"total": total, "requests": by_verb, "background": background}


class ApiserverMetrics:
    """``/metrics`` of the real apiserver, read with the admin client certificate of ``kubeconfig_path``
    over a connection closed after every reading (not counted as the measured process's)."""

    def __init__(self, kubeconfig_path: Path) -> None:
        document = yaml.safe_load(kubeconfig_path.read_text())
        cluster, user = document["clusters"][0]["cluster"], document["users"][0]["user"]
        self.server = str(cluster["server"])
        self.tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        with tempfile.TemporaryDirectory(prefix="gang-bench-client-") as folder:
            certificate, key = Path(folder) / "client.crt", Path(folder) / "client.key"
            certificate.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            self.tls.load_cert_chain(certificate, key)
        self.baseline: dict[tuple[str, str], float] = {}

    async def read(self) -> str:
        connector = aiohttp.TCPConnector(ssl=self.tls, force_close=True)
        async with (
            aiohttp.ClientSession(self.server, connector=connector) as session,
            session.get("/metrics", timeout=aiohttp.ClientTimeout(total=60)) as answer,
        ):
            answer.raise_for_status()
            return await answer.text()

    async def open_watches(self) -> int:
        """WATCH requests open now on the gang's kinds (``apiserver_longrunning_requests``)."""
        samples = parse_samples(await self.read(), "apiserver_longrunning_requests")
        return round(sum(value for (verb, resource), value in samples.items() if is_measured(verb, resource)))

    async def metrics(self, method: str = "GET") -> dict[str, Any]:
        """The requests completed since the last ``DELETE`` (as ``/_sim/metrics``: ``DELETE`` also
        starts the next count)."""
        current = parse_samples(await self.read(), "apiserver_request_total")
        report = delta_report(self.baseline, current)
        if method == "DELETE":
            self.baseline = current
        return report
