"""``creation.launch`` run again for the same try (a worker retrying after the first launch
failed past its retries mid-way) creates only the members that are missing and adopts the others
(``AlreadyExists``): every member is stored exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import yaml

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness

SIZE = 64
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "trainer:sim"}]}}
QUICK = ClientOptions(retry_attempts=2, retry_base_delay=0.01, retry_max_delay=0.02, max_parallel_requests=8)


@pytest.mark.timeout(60)
def test_a_launch_retried_after_failing_midway_creates_only_the_missing_members() -> None:
    spec = GangSpec(
        name="adopt-t1-00000000",
        namespace="default",
        size=SIZE,
        pod_template=TEMPLATE,
        mode=ReservationMode.PROVISIONING_REQUEST,
        resources=MemberResources(gpus=1),
        provisioning_class="queued-provisioning.gke.io",
    )
    stored: Counter[str] = Counter()
    with ClusterHarness(seed=0) as harness:
        assert harness.emulator is not None
        context = harness.emulator.context

        def changed(event_type: str, resource: str, obj: dict[str, Any]) -> None:
            if resource == "v1/pods" and event_type == "ADDED":
                stored[obj["metadata"]["name"]] += 1
                if sum(stored.values()) == 20:
                    context.faults = Faults.parse("create/pods:1.0:503")

        harness.run(lambda: harness.store.subscribe(changed))
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))

        async def launch_twice() -> tuple[int, str]:
            async with await QUICK.connect(settings) as client:
                made = await creation.ensure_reservation(client, spec, owner_try=1)
                with pytest.raises(errors.Unavailable):
                    await creation.launch(client, spec, size=SIZE, owner_uid=made.owner_uid)
                first = sum(stored.values())
                harness.run(lambda: setattr(context, "faults", Faults.parse("")))
                done = await creation.launch(client, spec, size=SIZE, owner_uid=made.owner_uid)
                return first, done

        first, said = asyncio.run(launch_twice())
    assert 20 <= first < SIZE
    assert said == f"created {SIZE - first} member pods, 8 at a time, adopted {first}"
    assert len(stored) == SIZE and set(stored.values()) == {1}
