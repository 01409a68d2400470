"""Checkpoint and resume across tries: where members save, what they report, what the next try reads.

Every try of one DAG run gets the same checkpoint location, either a URI or path (any string the
trainer understands: ``gs://bucket/<dag>/<run>``, ``/mnt/ckpt/<run>``) or a PersistentVolumeClaim
mounted into every member (:class:`PersistentVolumeCheckpoint`). Members get (:func:`environment`):

=================================  ===============================================================
``GANG_CHECKPOINT_DIR``            the location (for a claim: its mount path in the container)
``GANG_TRY_NUMBER``                the Airflow try number of this try
``GANG_TERMINATION_MESSAGE_PATH``  container 0's ``terminationMessagePath`` (``/dev/termination-log``)
``GANG_RESUME``                    ``1`` only when an earlier try of the run reported a checkpoint
``GANG_RESUME_STEP``               the step of that checkpoint (only with ``GANG_RESUME``)
=================================  ===============================================================

How a checkpoint becomes known: a member writes ``{"checkpoint_step": N}`` (optionally ``"step": M``,
the last step it completed, ``M >= N``) to ``GANG_TERMINATION_MESSAGE_PATH`` after every save. When
its container terminates the kubelet copies that file into the pod's
``status.containerStatuses[].state.terminated.message`` (at most 4096 bytes;
https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/). The run
trigger reads it from every member pod before the pods are deleted (:func:`report_of_pod`), keeps
the latest (:func:`latest`), and the try's record stores it; the next try resumes from it. Nothing
is guessed from the storage itself: a try that reported nothing leaves ``GANG_RESUME`` unset.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from airflow_provider_gang.reservation.errors import GangSpecError

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
"""The kubelet's default ``terminationMessagePath`` (``v1.Container``)."""
DEFAULT_MOUNT_PATH = "/gang-checkpoint"
CLAIM_VOLUME = "gang-checkpoint"
"""Name of the volume a :class:`PersistentVolumeCheckpoint` adds to every member."""
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://.+")


@dataclass
class PersistentVolumeCheckpoint:
    """The ``checkpoint`` operator argument for a PersistentVolumeClaim: ``claim`` is mounted at
    ``mount_path`` in every container of every member, at ``sub_path`` of the volume (a relative
    path; ``""``: the volume's root). ``claim`` and ``sub_path`` are Jinja-templated (Airflow renders
    the ``template_fields`` of an object inside a templated field), e.g.
    ``sub_path="{{ dag.dag_id }}/{{ run_id }}"``. The claim must allow every member to mount it at
    once (``ReadWriteMany``) unless the gang fits one node."""

    claim: str
    sub_path: str = ""
    mount_path: str = DEFAULT_MOUNT_PATH
    template_fields: ClassVar[tuple[str, ...]] = ("claim", "sub_path")


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint of one try, as stored in ``GangSpec.checkpoint`` (plain values).

    - ``location``: the URI or path members save to; for a claim, its mount path.
    - ``claim`` / ``sub_path``: the PersistentVolumeClaim mounted at ``location`` (``None``: no volume).
    - ``try_number``: the Airflow try (``GANG_TRY_NUMBER``; ``None`` before a try is planned).
    - ``resume_step``: the step an earlier try of the run reported (``None``: start afresh).
    """

    location: str
    claim: str | None = None
    sub_path: str = ""
    try_number: int | None = None
    resume_step: int | None = None

    def for_try(self, try_number: int, resume_step: int | None) -> Checkpoint:
        return replace(self, try_number=try_number, resume_step=resume_step)

    def to_dict(self) -> dict[str, Any]:
        return {
            "location": self.location,
            "claim": self.claim,
            "sub_path": self.sub_path,
            "try_number": self.try_number,
            "resume_step": self.resume_step,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        resume, number = data.get("resume_step"), data.get("try_number")
        return cls(
            location=str(data["location"]),
            claim=None if data.get("claim") is None else str(data["claim"]),
            sub_path=str(data.get("sub_path") or ""),
            try_number=None if number is None else int(number),
            resume_step=None if resume is None else int(resume),
        )


def from_argument(value: str | PersistentVolumeCheckpoint) -> Checkpoint:
    """The :class:`Checkpoint` an operator's (rendered) ``checkpoint`` argument names; raises
    :class:`GangSpecError` (field ``checkpoint``) saying how to write it right."""
    if isinstance(value, PersistentVolumeCheckpoint):
        return _claim_checkpoint(value)
    if not isinstance(value, str) or not value.strip():
        raise GangSpecError(
            "checkpoint",
            f"expected a URI or absolute path (e.g. 'gs://bucket/{{{{ run_id }}}}') "
            f"or PersistentVolumeCheckpoint(claim=...), got {value!r}",
        )
    if not (_URI.match(value) or value.startswith("/")):
        raise GangSpecError(
            "checkpoint",
            f"{value!r} is neither a URI (scheme://...) nor an absolute path; members "
            "run in their own working directory, so write e.g. '/mnt/checkpoints/{{ run_id }}'",
        )
    return Checkpoint(location=value)


_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
"""A Jinja expression or statement in a templated argument."""


def stand_in(value: object) -> object:
    """``value`` with each Jinja part of a ``checkpoint`` argument replaced by ``x``, so the rest is
    checked at DAG parse time: ``"rel/{{ run_id }}"`` (not absolute) and a ``sub_path`` of
    ``"../{{ run_id }}"`` are refused there already. A location that starts with Jinja may render to
    any root, so that part stands in as ``/parse-check``. The rendered value is checked again when
    the try starts."""
    if isinstance(value, str) and _JINJA.search(value):
        leading = _JINJA.match(value)
        if leading is not None:  # it may render to any root: an absolute path or a URI
            value = "/parse-check" + value[leading.end() :]
        return _JINJA.sub("x", value)
    if isinstance(value, PersistentVolumeCheckpoint):
        claim, sub_path = (
            _JINJA.sub("x", part) if isinstance(part, str) else part for part in (value.claim, value.sub_path)
        )
        return PersistentVolumeCheckpoint(claim=claim, sub_path=sub_path, mount_path=value.mount_path)
    return value


def _claim_checkpoint(value: PersistentVolumeCheckpoint) -> Checkpoint:
    claim, sub_path, mount = value.claim, value.sub_path, value.mount_path
    if not isinstance(claim, str) or len(claim) > 253 or not _DNS_SUBDOMAIN.match(claim):
        raise GangSpecError(
            "checkpoint",
            f"PersistentVolumeCheckpoint claim {claim!r} is not a claim name "
            "(lowercase letters, digits, '-' and '.'); give the PersistentVolumeClaim's name",
        )
    parts = sub_path.split("/") if isinstance(sub_path, str) else [".."]
    if not isinstance(sub_path, str) or sub_path.startswith("/") or ".." in parts:
        raise GangSpecError(
            "checkpoint",
            f"PersistentVolumeCheckpoint sub_path {sub_path!r} must be a relative "
            "path inside the volume without '..', e.g. '{{ dag.dag_id }}/{{ run_id }}'",
        )
    if not isinstance(mount, str) or not mount.startswith("/") or posixpath.normpath(mount) == "/":
        raise GangSpecError(
            "checkpoint",
            f"PersistentVolumeCheckpoint mount_path {mount!r} must be an absolute "
            f"path other than '/', e.g. {DEFAULT_MOUNT_PATH!r}",
        )
    return Checkpoint(location=mount, claim=claim, sub_path=sub_path)


def termination_message_path(container: Mapping[str, Any]) -> str:
    """Where the kubelet reads ``container``'s termination message from."""
    return str(container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH)


ENVIRONMENT_NAMES = (
    "GANG_CHECKPOINT_DIR",
    "GANG_TERMINATION_MESSAGE_PATH",
    "GANG_TRY_NUMBER",
    "GANG_RESUME",
    "GANG_RESUME_STEP",
)
"""Every variable :func:`environment` may set (a user ``env`` entry of the same name is refused)."""


def environment(checkpoint: Checkpoint, message_path: str) -> list[dict[str, str]]:
    """The env entries of the module docstring's table, in a stable order."""
    env = [
        {"name": "GANG_CHECKPOINT_DIR", "value": checkpoint.location},
        {"name": "GANG_TERMINATION_MESSAGE_PATH", "value": message_path},
    ]
    if checkpoint.try_number is not None:
        env.append({"name": "GANG_TRY_NUMBER", "value": str(checkpoint.try_number)})
    if checkpoint.resume_step is not None:
        env += [
            {"name": "GANG_RESUME", "value": "1"},
            {"name": "GANG_RESUME_STEP", "value": str(checkpoint.resume_step)},
        ]
    return env


def mount(pod_spec: dict[str, Any], checkpoint: Checkpoint) -> None:
    """Add the claim's volume to ``pod_spec`` and mount it in every container, init containers too
    (no-op without a claim)."""
    if checkpoint.claim is None:
        return
    volume = {"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": checkpoint.claim}}
    pod_spec["volumes"] = [
        *(item for item in pod_spec.get("volumes") or () if item.get("name") != CLAIM_VOLUME),
        volume,
    ]
    volume_mount: dict[str, Any] = {"name": CLAIM_VOLUME, "mountPath": checkpoint.location}
    if checkpoint.sub_path:
        volume_mount["subPath"] = checkpoint.sub_path
    for kind in ("initContainers", "containers"):
        if kind not in pod_spec:
            continue
        containers = []
        for container in pod_spec[kind]:
            kept = [item for item in container.get("volumeMounts") or () if item.get("name") != CLAIM_VOLUME]
            containers.append({**container, "volumeMounts": [*kept, volume_mount]})
        pod_spec[kind] = containers


@dataclass(frozen=True)
class CheckpointReport:
    """What a member reported: ``step`` of its last checkpoint, ``progress`` the last step it had
    completed when it wrote the message (``>= step``), and the pod and rank that said so."""

    step: int
    progress: int
    pod: str = ""
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "progress": self.progress, "pod": self.pod, "rank": self.rank}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointReport:
        rank = data.get("rank")
        return cls(
            int(data["step"]),
            int(data.get("progress", data["step"])),
            str(data.get("pod") or ""),
            None if rank is None else int(rank),
        )


def parse_message(text: str) -> tuple[int, int]:
    """``(checkpoint step, progress)`` of a termination message; ``ValueError`` saying what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg})") from None
    if not isinstance(data, dict) or "checkpoint_step" not in data:
        raise ValueError('not an object with "checkpoint_step"')
    values = {"checkpoint_step": data["checkpoint_step"], "step": data.get("step", data["checkpoint_step"])}
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} is {value!r}, not a whole number >= 0")
    step, progress = int(values["checkpoint_step"]), int(values["step"])
    if progress < step:
        raise ValueError(f"step {progress} is before checkpoint_step {step}")
    return step, progress


def report_of_pod(pod: Mapping[str, Any], rank: int | None) -> tuple[CheckpointReport | None, str | None]:
    """The report in container 0's termination message (its current or last termination), and a
    warning naming the pod when a message is there but malformed (the message is then ignored)."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    first = str(containers[0].get("name") or "") if containers else ""
    status = next((item for item in statuses if item.get("name") == first), statuses[0] if statuses else None)
    if not status:
        return None, None
    for key in ("state", "lastState"):
        message = ((status.get(key) or {}).get("terminated") or {}).get("message")
        if not message:
            continue
        try:
            step, progress = parse_message(str(message))
        except ValueError as problem:
            return None, f"pod {name}: termination message {str(message)[:200]!r} ignored: {problem}"
        return CheckpointReport(step, progress, name, rank), None
    return None, None


def latest(reports: Iterable[CheckpointReport | None]) -> CheckpointReport | None:
    """The report of the most advanced checkpoint (ties: the most progress, then the lowest rank)."""
    known = [item for item in reports if item is not None]
    return max(known, key=lambda item: (item.step, item.progress, -(item.rank or 0)), default=None)


def resume_step(reports: Sequence[int | None]) -> int | None:
    """The step the next try resumes from: the last checkpoint any earlier try reported, oldest try
    first in ``reports`` (a try that reported none keeps the one before it: the storage still holds it)."""
    known = [step for step in reports if step is not None]
    return known[-1] if known else None


@dataclass(frozen=True)
class WorkSplit:
    """GPU-seconds of a failed try split by its checkpoint: ``saved`` produced the checkpointed steps
    a later try does not redo, ``lost`` is the rest of what its members used (start-up, and every step
    after the checkpoint), which a later try redoes."""

    lost: float = 0.0
    saved: float = 0.0


def split_work(used: float, *, start_step: int, report: CheckpointReport | None) -> WorkSplit:
    """Split ``used`` GPU-seconds of a failed try that began at ``start_step`` (0: afresh) in proportion
    to its steps: ``report.step - start_step`` of ``report.progress - start_step`` were kept."""
    if report is None or report.step <= start_step:
        return WorkSplit(lost=used)
    done = report.progress - start_step
    kept = used * (report.step - start_step) / done
    return WorkSplit(lost=used - kept, saved=kept)
