"""The cluster side of the clean-up: list a namespace's gangs with their verdicts, withdraw some.

Every call opens one client of its own (``kube.options.ClientOptions``: each request bounded by its
timeout and retried on 429/5xx/transport errors) and withdraws through ``hooks.deletion``'s one
error policy, owner first with preconditions (:func:`hooks.deletion.withdraw_unless_claimed`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_gang.hooks import deletion, inspection
from airflow_provider_gang.kube.options import ClientOptions
from airflow_provider_gang.kube.settings import ConnectionSettings
from airflow_provider_gang.sweep.verdict import TaskInstanceFacts, Verdict, judge

SWEEP_CLIENT_OPTIONS = ClientOptions(request_timeout=20.0, retry_attempts=3)
"""Patient enough for a slow API server, short enough that an unreachable one is reported within
about a minute per connection."""
WITHDRAW_BUDGET_SECONDS = 60.0
"""Longest one :func:`withdraw_gangs` call keeps deleting."""


@dataclass(frozen=True)
class FoundGang:
    """A gang of the cluster, its task instance (``None``: none known) and the verdict on it;
    ``deleted``: objects deleted by this sweep (``None``: not withdrawn, or kept at the last moment
    because a newer try claimed it)."""

    owner: inspection.GangOwner
    task_instance: TaskInstanceFacts | None
    verdict: Verdict
    deleted: int | None = None


async def sweep_namespace(
    settings: ConnectionSettings,
    namespace: str | None,
    facts_by_gang: Mapping[str, TaskInstanceFacts],
    *,
    delete: bool,
    keep_unknown: bool = False,
    options: ClientOptions = SWEEP_CLIENT_OPTIONS,
) -> list[FoundGang]:
    """Every gang of ``namespace`` (``None``: all) with its verdict; with ``delete``, the gangs to be
    withdrawn are withdrawn (``keep_unknown``: not those no task instance knows). Raises the
    ``kube.errors`` of the LIST and of the deletions (after ``hooks.deletion``'s passes)."""
    found: list[FoundGang] = []
    async with await options.connect(settings) as client:
        for owner in await inspection.gang_owners(client, namespace):
            facts = facts_by_gang.get(owner.gang)
            verdict = judge(facts, deleting=owner.deleting)
            if verdict.withdraw and facts is None and keep_unknown:
                verdict = Verdict(False, f"{verdict.reason}; kept: --keep-unknown")
            deleted = None
            if delete and verdict.withdraw:
                up_to_try = facts.try_number if facts is not None else owner.owner_try or 0
                deleted = await deletion.withdraw_unless_claimed(
                    client, owner.namespace, owner.gang, up_to_try=up_to_try, mode=owner.mode
                )
            found.append(FoundGang(owner, facts, verdict, deleted))
    return found


async def withdraw_gangs(
    settings: ConnectionSettings,
    namespace: str,
    gangs: Iterable[str],
    *,
    up_to_try: int,
    log: Callable[..., None],
    options: ClientOptions = SWEEP_CLIENT_OPTIONS,
) -> int:
    """Withdraw each of ``gangs`` unless a try after ``up_to_try`` claimed it (``log`` says which
    were kept); how many objects were deleted. Raises what the deletions raise; bounded by
    :data:`WITHDRAW_BUDGET_SECONDS`."""

    async def run() -> int:
        total = 0
        async with await options.connect(settings) as client:
            for gang in dict.fromkeys(gangs):
                deleted = await deletion.withdraw_unless_claimed(client, namespace, gang, up_to_try=up_to_try)
                if deleted is None:
                    log("Gang %s: kept, a try after %d owns it now", gang, up_to_try)
                total += deleted or 0
        return total

    return await asyncio.wait_for(run(), WITHDRAW_BUDGET_SECONDS)
