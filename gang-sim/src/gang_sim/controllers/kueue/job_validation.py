"""Kueue's validating webhook for Jobs, the Topology Aware Scheduling part. Pure.

A Job in a LocalQueue (label ``kueue.x-k8s.io/queue-name``) is refused at create by Kueue's webhook
``vjob.kb.io`` when its pod template's TAS annotations contradict each other, as
kubernetes-sigs/kueue v0.17.0 ``pkg/controller/jobframework/tas_validation.go``
(``ValidateTASPodSetRequest``) checks them: at most one of required / preferred / unconstrained
topology; the level annotations (and ``podset-slice-required-topology``) label keys;
``podset-unconstrained-topology`` a boolean (``strconv.ParseBool``); ``podset-slice-size`` a number
>= 1 and no greater than the Job's pod count, given exactly when the slice topology is. The apiserver
answers 403 ``Forbidden``: ``admission webhook "vjob.kb.io" denied the request: <errors>`` (one
error as it is, several in brackets, comma-separated: ``ErrorList.ToAggregate``), as the real one
answered on the real tier.

Not modelled: the webhook on updates, ``podset-group-name`` and the multi-layer constraints
annotation, Kueue's other Job checks (its partial-admission ones, queue names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.validation import validate_qualified_key
from gang_sim.controllers.kueue import tas
from gang_sim.controllers.kueue import workloads as wl

WEBHOOK = "vjob.kb.io"
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
_PATH = "spec.template.metadata.annotations"
_BOOLEANS = ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False")


def _at(annotation: str) -> str:
    return f"{_PATH}[{annotation}]"


def _level_errors(annotations: Mapping[str, str]) -> list[str]:
    errors = []
    for annotation in (tas.REQUIRED, tas.PREFERRED, SLICE_TOPOLOGY):
        if annotation in annotations:
            errors += [
                f"{cause['field']}: {cause['message']}"
                for cause in validate_qualified_key(annotations[annotation], _at(annotation))
            ]
    return errors


def _slice_errors(annotations: Mapping[str, str], count: int) -> list[str]:
    errors = []
    size = annotations.get(SLICE_SIZE)
    if size is not None:
        if not size.lstrip("+-").isdigit():
            errors.append(f'{_at(SLICE_SIZE)}: Invalid value: "{size}": must be a numeric value')
        elif int(size) < 1:
            errors.append(f'{_at(SLICE_SIZE)}: Invalid value: "{size}": must be greater than or equal to 1')
        elif int(size) > count:
            errors.append(f'{_at(SLICE_SIZE)}: Invalid value: "{size}": must not be greater than pod set count {count}')
    if SLICE_TOPOLOGY in annotations and size is None:
        errors.append(f"{_at(SLICE_SIZE)}: Required value: must be set when '{SLICE_TOPOLOGY}' is specified")
    if SLICE_TOPOLOGY not in annotations and size is not None:
        errors.append(f"{_at(SLICE_SIZE)}: Forbidden: may not be set when '{SLICE_TOPOLOGY}' is not specified")
    return errors


def tas_errors(job: Mapping[str, Any]) -> list[str]:
    """The field errors of the Job's TAS annotations, in upstream's order."""
    template = ((job.get("spec") or {}).get("template")) or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    errors = []
    if sum(annotation in annotations for annotation in tas.TAS_ANNOTATIONS) > 1:
        modes = ", ".join(f'"{annotation}"' for annotation in tas.TAS_ANNOTATIONS)
        errors.append(f"{_PATH}: Invalid value: must not contain more than one topology annotation: [{modes}]")
    errors += _level_errors(annotations)
    unconstrained = annotations.get(tas.UNCONSTRAINED)
    if unconstrained is not None and unconstrained not in _BOOLEANS:
        errors.append(f'{_at(tas.UNCONSTRAINED)}: Invalid value: "{unconstrained}": must be a boolean value')
    return errors + _slice_errors(annotations, wl.job_pod_count(job))


def validate_on_create(resource: str, body: dict[str, Any]) -> None:
    """Refuse a queued Job whose TAS annotations are invalid (module docstring); others pass."""
    if resource != "batch/v1/jobs" or not ((body.get("metadata") or {}).get("labels") or {}).get(wl.QUEUE_NAME):
        return
    errors = tas_errors(body)
    if errors:
        message = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ApiError(403, "Forbidden", f'admission webhook "{WEBHOOK}" denied the request: {message}')
