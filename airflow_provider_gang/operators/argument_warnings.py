"""What a ``GangTrainingOperator``'s arguments allow but probably do not mean, said once at parse time.

Each warning names the argument and the change that fixes it. Errors are not here: an argument that
cannot work raises ``reservation.tries.arguments.GangArgumentError`` from the operator's checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_gang.reservation import checkpoint as checkpoints
from airflow_provider_gang.reservation import fallback, validation
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import GangSpec
from airflow_provider_gang.reservation.tries import arguments as checks
from airflow_provider_gang.reservation.tries import plan


def parse_time_warnings(
    *,
    fallbacks: Sequence[fallback.FallbackStep],
    base: GangSpec,
    retries: int,
    checkpoint: str | checkpoints.PersistentVolumeCheckpoint | None,
    retry_on_exit_codes: Sequence[int] | None,
    reservation: str,
    provisioning_class: str | None,
    provisioning_parameters: Mapping[str, str],
) -> list[str]:
    """Steps of ``fallbacks`` that change nothing for ``base`` (the gang as configured), a ladder
    longer than ``retries`` allows, a ``checkpoint`` that every run shares, ``retry_on_exit_codes``
    that no step answers, ``provisioning_parameters`` no controller of ``provisioning_class`` reads."""
    warnings = [
        f"fallbacks {step} changes nothing for this gang; remove it or change it"
        for step in fallback.no_op_steps(fallbacks, base)
    ]
    found = (
        ladder_too_long(fallbacks, retries),
        shared_checkpoint(checkpoint),
        unanswered_exit_codes(fallbacks, retries, retry_on_exit_codes),
        None if reservation == "kueue" else validation.unknown_parameters(provisioning_class, provisioning_parameters),
    )
    return warnings + [warning for warning in found if warning]


def ladder_too_long(fallbacks: Sequence[fallback.FallbackStep], retries: int) -> str | None:
    """The ladder needs more tries than ``retries`` gives it."""
    needed = fallback.tries_needed(fallbacks)
    if needed <= retries:
        return None
    steps = "1 step" if len(fallbacks) == 1 else f"{len(fallbacks)} steps"
    using = f" using {needed} tries" if needed != len(fallbacks) else ""
    them = "it" if len(fallbacks) == 1 and needed == 1 else "them"
    can = "no retry" if retries == 0 else ("only 1 retry" if retries == 1 else f"only {retries} retries")
    return f"fallbacks has {steps}{using} but retries={retries}: {can} can use {them}; set retries={needed}"


def shared_checkpoint(checkpoint: str | checkpoints.PersistentVolumeCheckpoint | None) -> str | None:
    """A checkpoint path without Jinja: every run of the DAG writes the same one."""
    if not isinstance(checkpoint, str) or checks.has_jinja(checkpoint):
        return None
    return (
        f"checkpoint {checkpoint!r} is the same for every run of the DAG, so runs overwrite "
        "each other's checkpoints; add the run to it, e.g. '.../{{ run_id }}'"
    )


def unanswered_exit_codes(
    fallbacks: Sequence[fallback.FallbackStep], retries: int, retry_on_exit_codes: Sequence[int] | None
) -> str | None:
    """``retry_on_exit_codes`` set while no step of the effective ladder answers a retryable exit."""
    ladder = plan.effective_ladder(fallbacks, retries)
    if not retry_on_exit_codes or any(Reason.MEMBER_EXIT_RETRYABLE in step.reasons for step in ladder):
        return None
    return (
        "retry_on_exit_codes is set but no step of the ladder answers member_exit_retryable, so "
        "such a try is never retried; add RetryAsIs() to fallbacks (or set retries without them)"
    )
