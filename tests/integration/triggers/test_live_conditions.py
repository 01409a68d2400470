"""The Gang page's live read of a deferred try's reservation (``plugin.live.read_live_conditions``),
from the kwargs of the trigger row (``plugin.stored_records.watched_reservation``), against the
emulator: the conditions when it answers, a sentence when it does not - within the page's time
limit, never an exception."""

from __future__ import annotations

import asyncio
import time

from airflow_provider_gang.plugin.live import LIVE_READ_TIMEOUT_SECONDS, read_live_conditions
from airflow_provider_gang.plugin.stored_records import TriggerRow, WatchedReservation, watched_reservation
from airflow_provider_gang.reservation.spec import ReservationMode

from .gangs import Gang, condition, gang_spec

TRIGGER = "airflow_provider_gang.triggers.reservation.ReservationTrigger"


async def waiting_gang(client, connection) -> WatchedReservation | None:
    gang = await Gang(client, gang_spec(ReservationMode.PROVISIONING_REQUEST)).create()
    await gang.set_request_conditions(
        condition("Accepted"), condition("Provisioned", "False", reason="Pending", message="waiting for 4 nodes")
    )
    return watched_reservation(TriggerRow(TRIGGER, gang.reservation_kwargs(connection)))


async def test_the_conditions_of_the_watched_request_are_read_from_the_cluster(sim, client, connection):
    trigger = await waiting_gang(client, connection)
    shown = await asyncio.to_thread(read_live_conditions, trigger)
    assert shown is not None and shown.startswith("ProvisioningRequest Accepted=True")
    assert "Provisioned=False (Pending: waiting for 4 nodes)" in shown


async def test_a_cluster_failing_past_the_retries_gives_a_sentence_within_the_time_limit(sim, client, connection):
    trigger = await waiting_gang(client, connection)
    sim.set_faults("get:1.0:503")
    started = time.monotonic()
    shown = await asyncio.to_thread(read_live_conditions, trigger)
    assert shown is not None and shown.startswith("could not read the cluster (Unavailable: 503")
    assert time.monotonic() - started < LIVE_READ_TIMEOUT_SECONDS + 1


async def kueue_gang(client, connection, status) -> WatchedReservation | None:
    gang = await Gang(client, gang_spec(ReservationMode.KUEUE, size=6)).create()
    await gang.set_workload_status(status)
    return watched_reservation(TriggerRow(TRIGGER, gang.reservation_kwargs(connection)))


async def test_a_workload_waiting_for_quota_shows_kueue_s_pending_reason(sim, client, connection):
    message = (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor l4, "
        "request > maximum capacity (6 > 4)"
    )
    status = {"conditions": [condition("QuotaReserved", "False", reason="ExceedsMaxQuota", message=message)]}
    shown = await asyncio.to_thread(read_live_conditions, await kueue_gang(client, connection, status))
    assert shown is not None and shown.startswith("Workload job-train-t1-0a1b2c3d-")
    assert f"waiting for quota: ExceedsMaxQuota - {message}; Workload QuotaReserved=False" in shown


async def test_a_rejected_check_outranks_admitted_on_the_page(sim, client, connection):
    check = {
        "name": "prov",
        "state": "Rejected",
        "message": "capacity revoked",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {"conditions": [condition("QuotaReserved"), condition("Admitted")], "admissionChecks": [check]}
    shown = await asyncio.to_thread(read_live_conditions, await kueue_gang(client, connection, status))
    assert shown is not None
    assert "admission check rejected (admission check 'prov' is Rejected: capacity revoked)" in shown
    assert shown.endswith("admission checks prov=Rejected (capacity revoked)")
