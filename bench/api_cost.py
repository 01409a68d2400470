"""API cost of waiting: one gang trigger vs 8 deferrable KubernetesPodOperators, counted by the emulator.

Both are measured in the same run against the same emulator (``sim``), whose ``/_sim/metrics`` counts
every Kubernetes API request (watches included):

* **anchor** - 8 real ``KubernetesPodTrigger`` instances (cncf-kubernetes, operator defaults: pod GET
  every 5 s while Pending plus the 5 s event watch) polling 8 Pending pods for ``--anchor-seconds`` of
  real time; their rate is extrapolated to 10 minutes. Reading that loop
  (``await_pod_start`` in cncf-kubernetes ``utils/pod_manager.py``, one pod GET per 5 s, plus
  ``watch_pod_events`` in ``hooks/kubernetes.py``, a pod GET and a 5 s event WATCH per turn) gives ~36
  requests per pod per minute.
* **gang** - one ``ReservationTrigger`` for a gang of 8 in ``gates`` mode (a ProvisioningRequest that
  stays Accepted, plus 8 gated member pods) until its own 10-minute deadline. Time is *scaled*: the
  deadline and the watch length are divided by ``--scale`` (10 min -> 6 s, 5 min watches -> 3 s at
  the default 100), so the request count equals that of a real 10-minute wait with 5-minute watches.

Run: ``.venv/bin/python -m bench.api_cost [--anchor-seconds 30] [--scale 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import tempfile
import time
from typing import Any

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="gang-bench-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # the 8 KPO triggers log every poll

import yaml
from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger

from airflow_provider_gang.kube.client import KubeClient
from airflow_provider_gang.kube.resources import CONFIG_MAPS, POD_TEMPLATES, PODS, PROVISIONING_REQUESTS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import common, owner, pods, provisioning
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from airflow_provider_gang.triggers.reservation import ReservationTrigger
from gang_sim.testing import ClusterHarness

GANG_SIZE = 8
WAIT_MINUTES = 10.0
DOCUMENTED_KPO_PER_POD_PER_MINUTE = 36.0
TEMPLATE = {"spec": {"containers": [{"name": "base", "image": "busybox"}]}}


def metrics(harness: ClusterHarness) -> dict[str, Any]:
    assert harness.emulator is not None
    context = harness.emulator.context
    snapshot: dict[str, Any] = harness.run(context.metrics.snapshot)
    return snapshot


def reset(harness: ClusterHarness) -> None:
    assert harness.emulator is not None
    harness.run(harness.emulator.context.metrics.reset)


async def measure_anchor(harness: ClusterHarness, kubeconfig: dict[str, Any], seconds: float) -> dict[str, Any]:
    """8 cncf KubernetesPodTriggers waiting on 8 Pending pods for ``seconds`` of real time."""
    async with await KubeClient.connect(ConnectionSettings(kubeconfig=kubeconfig)) as client:
        for index in range(GANG_SIZE):
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"kpo-{index}"}, "spec": TEMPLATE["spec"]}
            await client.create(PODS, body)
    triggers = [
        KubernetesPodTrigger(
            pod_name=f"kpo-{index}",
            pod_namespace="default",
            trigger_start_time=datetime.datetime.now(datetime.timezone.utc),
            base_container_name="base",
            kubernetes_conn_id=None,
            connection_extras={},
            config_dict=kubeconfig,
            get_logs=False,
            startup_timeout=3600,
            schedule_timeout=3600,
        )
        for index in range(GANG_SIZE)
    ]
    reset(harness)
    runs = [asyncio.ensure_future(anext(trigger.run())) for trigger in triggers]
    await asyncio.sleep(seconds)
    for run in runs:
        run.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    return metrics(harness)


async def measure_gang(
    harness: ClusterHarness, kubeconfig: dict[str, Any], scale: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One ReservationTrigger for a gang of 8 (gates mode) until its scaled 10-minute deadline."""
    spec = GangSpec(
        name="bench-t1-00000000",
        namespace="default",
        size=GANG_SIZE,
        pod_template=TEMPLATE,
        mode=ReservationMode.GATES,
        resources=MemberResources(gpus=1),
        provisioning_class="queued-provisioning.gke.io",
    )
    names = naming.GangNames(spec.name)
    settings = ConnectionSettings(kubeconfig=kubeconfig)
    async with await KubeClient.connect(settings) as client:
        owner_uid = (await client.create(CONFIG_MAPS, owner.owner_config_map(spec)))["metadata"]["uid"]
        await client.create(POD_TEMPLATES, provisioning.pod_template(spec, owner_uid=owner_uid))
        await client.create(PROVISIONING_REQUESTS, provisioning.provisioning_request(spec, owner_uid=owner_uid))
        for rank in range(GANG_SIZE):
            await client.create(PODS, pods.gated_pod(spec, rank, owner_uid=owner_uid))
        accepted = {
            "type": "Accepted",
            "status": "True",
            "reason": "Accepted",
            "message": "waiting for capacity",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await client.patch(
            PROVISIONING_REQUESTS,
            names.provisioning_request,
            {"status": {"conditions": [accepted]}},
            subresource="status",
        )
    trigger = ReservationTrigger(
        connection=settings.to_dict(),
        gang_name=spec.name,
        namespace="default",
        deadline=time.time() + WAIT_MINUTES * 60 / scale,
        mode=spec.mode.value,
        size=GANG_SIZE,
        started_at=time.time(),
        provisioning_request=names.provisioning_request,
        pod_selector=common.member_selector(spec),
        scheduling_gate=names.scheduling_gate,
        watch_timeout_seconds=max(1, round(300 / scale)),
    )
    reset(harness)
    events: Any = trigger.run()  # an async generator: closed below
    try:
        event = await anext(events)
    finally:
        await events.aclose()
        await trigger.cleanup()
    return metrics(harness), dict(event.payload)


def breakdown(snapshot: dict[str, Any]) -> str:
    return ", ".join(
        f"{verb} {resource}: {count}" for verb, per in snapshot["requests"].items() for resource, count in per.items()
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--anchor-seconds", type=float, default=30.0, help="real seconds to run the 8 KPO triggers")
    parser.add_argument("--scale", type=float, default=100.0, help="time scale of the gang trigger's 10-minute wait")
    options = parser.parse_args()
    with ClusterHarness(seed=0) as harness:
        kubeconfig = yaml.safe_load(harness.kubeconfig_path.read_text())
        anchor = await measure_anchor(harness, kubeconfig, options.anchor_seconds)
        gang, event = await measure_gang(harness, kubeconfig, options.scale)
    per_pod_minute = anchor["total"] / GANG_SIZE / (options.anchor_seconds / 60)
    anchor_ten_minutes = per_pod_minute * GANG_SIZE * WAIT_MINUTES
    print(
        f"Waiting {WAIT_MINUTES:.0f} minutes for a gang of {GANG_SIZE} pods, Kubernetes API requests (emulator counts)"
    )
    print(f"  anchor, 8 x KubernetesPodTrigger, measured {options.anchor_seconds:.0f} s real time:")
    print(
        f"    {anchor['total']} requests = {per_pod_minute:.1f} per pod per minute"
        f" (documented: ~{DOCUMENTED_KPO_PER_POD_PER_MINUTE:.0f}); {breakdown(anchor)}"
    )
    print(f"    extrapolated to {WAIT_MINUTES:.0f} minutes: {anchor_ten_minutes:.0f} requests")
    print(f"  gang, 1 x ReservationTrigger, {WAIT_MINUTES:.0f} minutes at time scale 1/{options.scale:.0f}:")
    print(f"    {gang['total']} requests; {breakdown(gang)}; ended with reason {event['reason']!r}")
    print(f"  ratio anchor / gang: {anchor_ten_minutes / max(1, gang['total']):.0f}x fewer requests for the gang")


if __name__ == "__main__":
    asyncio.run(main())
