"""Releasing a gates-mode gang when the answer to a gate-removing patch is lost (the patch took
effect, the connection was cut, the client sent the same patch again): the retried JSON patch's
``test`` no longer holds and the API server answers 422; the release reads the pod again, finds the
gate gone and carries on - every member ends ungated, the launch succeeds."""

from __future__ import annotations

import asyncio

import pytest
import yaml

from airflow_provider_gang.hooks import creation
from airflow_provider_gang.kube import errors
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.resources import PODS
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.reservation import manifests
from airflow_provider_gang.reservation.spec import GangSpec, MemberResources, ReservationMode
from gang_sim.apiserver.http.faults import Faults
from gang_sim.testing import ClusterHarness

SIZE = 3
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "trainer:sim"}]}}
QUICK = ClientOptions(retry_attempts=3, retry_base_delay=0.01, retry_max_delay=0.02, max_parallel_requests=1)


@pytest.mark.timeout(60)
def test_a_release_whose_answer_was_lost_is_retried_without_failing() -> None:
    spec = GangSpec(
        name="release-t1-00000000",
        namespace="default",
        size=SIZE,
        pod_template=TEMPLATE,
        mode=ReservationMode.GATES,
        resources=MemberResources(gpus=1),
        provisioning_class="check-capacity.autoscaling.x-k8s.io",
    )
    with ClusterHarness(seed=0) as harness:
        assert harness.emulator is not None
        context = harness.emulator.context
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))

        async def release() -> tuple[str, list[list[object]]]:
            async with await QUICK.connect(settings) as client:
                made = await creation.ensure_reservation(client, spec, owner_try=1)
                harness.run(lambda: setattr(context, "faults", Faults.parse("patch/pods:1.0:reset:count:1")))
                said = await creation.launch(client, spec, size=SIZE, owner_uid=made.owner_uid)
                pods, _ = await client.list(PODS, "default", label_selector=manifests.common.member_selector(spec))
                return said, [pod["spec"].get("schedulingGates") or [] for pod in pods]

        said, gates = asyncio.run(release())
    assert said == f"released the scheduling gate of {SIZE} members together, 1 at a time"
    assert gates == [[]] * SIZE


@pytest.mark.timeout(60)
def test_a_release_whose_reread_fails_past_its_retries_raises_and_the_next_launch_finishes_it() -> None:
    spec = GangSpec(
        name="reread-t1-00000000",
        namespace="default",
        size=SIZE,
        pod_template=TEMPLATE,
        mode=ReservationMode.GATES,
        resources=MemberResources(gpus=1),
        provisioning_class="check-capacity.autoscaling.x-k8s.io",
    )
    with ClusterHarness(seed=0) as harness:
        assert harness.emulator is not None
        context = harness.emulator.context
        settings = ConnectionSettings(kubeconfig=yaml.safe_load(harness.kubeconfig_path.read_text()))

        async def release_twice() -> tuple[list[list[object]], str, list[list[object]]]:
            async with await QUICK.connect(settings) as client:
                made = await creation.ensure_reservation(client, spec, owner_try=1)
                # the first patch's answer is lost, and every read of a pod after it fails
                faults = "patch/pods:1.0:reset:count:1,get/pods:1.0:503"
                harness.run(lambda: setattr(context, "faults", Faults.parse(faults)))
                with pytest.raises(errors.Unavailable):
                    await creation.launch(client, spec, size=SIZE, owner_uid=made.owner_uid)
                harness.run(lambda: setattr(context, "faults", Faults.parse("")))
                selector = manifests.common.member_selector(spec)
                pods, _ = await client.list(PODS, "default", label_selector=selector)
                between = [pod["spec"].get("schedulingGates") or [] for pod in pods]
                said = await creation.launch(client, spec, size=SIZE, owner_uid=made.owner_uid)
                pods, _ = await client.list(PODS, "default", label_selector=selector)
                return between, said, [pod["spec"].get("schedulingGates") or [] for pod in pods]

        between, said, gates = asyncio.run(release_twice())
    gate = [{"name": "airflow-gang.io/reread-t1-00000000"}]
    assert between == [[]] + [gate] * (SIZE - 1)  # the first release took effect, the others never started
    assert said == f"released the scheduling gate of {SIZE - 1} members together, 1 at a time"
    assert gates == [[]] * SIZE
