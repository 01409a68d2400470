"""The *simulated* container runtime's contract: the ``sim.gang.dev/`` pod annotations.

A container the kubelet does not run as a local process (its image matches no pattern of
``localProcessImages`` / ``--local-images``, see :mod:`...world.images`) runs nothing: the kubelet moves its
pod through the phases on the control plane's clock, as these pod annotations say (values are
strings, as every annotation value is):

================================  =======  ==========================================================
annotation                        default  meaning (simulated seconds)
================================  =======  ==========================================================
``sim.gang.dev/start-seconds``    ``2``    bound -> Running (image pull and container start)
``sim.gang.dev/run-seconds``      absent   Running -> exit; absent means "runs until deleted"
``sim.gang.dev/exit-code``        ``0``    the exit code of every container when it exits
``sim.gang.dev/stop-seconds``     ``0``    SIGTERM -> exit (code 143) when the kubelet stops the pod (its
                                           deletion, its node's shutdown); at or past the grace period
                                           the container is killed when that ends (code 137)
``sim.gang.dev/termination-       absent   what every container wrote to its ``terminationMessagePath``
message``                                  (its ``state.terminated.message``, :mod:`.termination_messages`)
================================  =======  ==========================================================

A pod without ``run-seconds`` never ends by itself; the kubelet says so once per pod with a
``Warning`` Event ``RunsUntilDeleted`` (:func:`runs_until_deleted_message`), so a first DAG that
waits forever explains itself in ``kubectl get events``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

ANNOTATION_PREFIX = "sim.gang.dev/"
START_SECONDS = ANNOTATION_PREFIX + "start-seconds"
RUN_SECONDS = ANNOTATION_PREFIX + "run-seconds"
EXIT_CODE = ANNOTATION_PREFIX + "exit-code"
STOP_SECONDS = ANNOTATION_PREFIX + "stop-seconds"
TERMINATION_MESSAGE = ANNOTATION_PREFIX + "termination-message"
ANNOTATIONS = (START_SECONDS, RUN_SECONDS, EXIT_CODE, STOP_SECONDS, TERMINATION_MESSAGE)
"""Every annotation the simulated runtime reads."""
DEFAULT_START_SECONDS = 2.0
RUNS_UNTIL_DELETED = "RunsUntilDeleted"
"""Reason of the Warning Event on a simulated pod without ``run-seconds``."""


@dataclass(frozen=True)
class RuntimeSpec:
    """What the simulated runtime does with one pod, read from its annotations."""

    start_seconds: float = DEFAULT_START_SECONDS
    run_seconds: float | None = None
    exit_code: int = 0
    stop_seconds: float = 0.0


def runtime_spec(pod: Obj) -> RuntimeSpec:
    """Parse the ``sim.gang.dev/`` annotations; raise ``ValueError`` naming a malformed one."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}

    def number(key: str) -> float | None:
        if key not in annotations:
            return None
        try:
            value = float(annotations[key])
        except (TypeError, ValueError):
            raise ValueError(f"annotation {key} must be a number of seconds, got {annotations[key]!r}") from None
        if value < 0:
            raise ValueError(f"annotation {key} must not be negative, got {annotations[key]!r}")
        return value

    start, stop = number(START_SECONDS), number(STOP_SECONDS)
    exit_code = annotations.get(EXIT_CODE, "0")
    try:
        code = int(exit_code)
    except (TypeError, ValueError):
        raise ValueError(f"annotation {EXIT_CODE} must be an integer, got {exit_code!r}") from None
    return RuntimeSpec(
        start_seconds=DEFAULT_START_SECONDS if start is None else start,
        run_seconds=number(RUN_SECONDS),
        exit_code=code,
        stop_seconds=0.0 if stop is None else stop,
    )


def termination_message(pod: Obj) -> str | None:
    """The ``sim.gang.dev/termination-message`` annotation: the simulated termination file's text."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(TERMINATION_MESSAGE)
    return None if value is None else str(value)


def runs_until_deleted_message(pod: Obj, has_local_images: bool) -> str:
    """The ``RunsUntilDeleted`` Event message: which images are only simulated and the two fixes."""
    containers = (pod.get("spec") or {}).get("containers") or []
    image_list = ", ".join(sorted({str(container.get("image") or "") for container in containers})) or "none"
    listed = "" if has_local_images else " (this cluster runs no image as a local process)"
    return (
        f"the emulator only simulates image(s) {image_list}{listed}: without annotation {RUN_SECONDS} this pod "
        f'runs until deleted. Add the pod annotation {RUN_SECONDS}: "<simulated seconds>" (with the gang '
        "operator: pod_template metadata.annotations), or run the image as a local process: list a glob matching it "
        "in the scenario's localProcessImages or pass gang-sim serve --local-images '<glob>'"
    )
