"""batch/v1 Job admission (upstream ``pkg/registry/batch/job/strategy.go`` and validation).

On create: ``status: {}``, spec defaults (parallelism/completions 1 when both unset, backoffLimit 6,
completionMode NonIndexed, suspend false) and, unless ``manualSelector``, the generated selector
``batch.kubernetes.io/controller-uid=<uid>`` plus the ``controller-uid``/``job-name`` labels on the
pod template. On update: selector and completions immutable (except Elastic Indexed resizes); the
pod template immutable, except scheduling directives and template labels/annotations while the Job
is suspended and has never started.
"""

from __future__ import annotations

import copy
from typing import Any

from gang_sim.apiserver import errors, validation
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.kinds import pods
from gang_sim.apiserver.kinds.base import Object, Strategy
from gang_sim.apiserver.registry import ResourceType


class JobStrategy(Strategy):
    """See module docstring."""

    tracks_generation = True

    def initial_status(self, new: Object) -> dict[str, Any] | None:
        return {}

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        super().prepare_create(new, resource_type)
        spec = new.setdefault("spec", {})
        if "parallelism" not in spec and "completions" not in spec:
            spec["parallelism"] = spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        template_spec = spec.setdefault("template", {}).setdefault("spec", {})
        if isinstance(template_spec, dict):
            pods.template_spec_defaults(template_spec)
        if not spec.get("manualSelector"):
            uid, name = new["metadata"]["uid"], new["metadata"].get("name", "")
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
            )

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        super().prepare_update(new, old, resource_type)
        template_spec = (new.get("spec") or {}).get("template", {}).get("spec")
        if isinstance(template_spec, dict):  # a PUT body is defaulted like a create body
            pods.template_spec_defaults(template_spec)

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        causes = super().validate_create(new, resource_type, field_validation)
        name = new["metadata"].get("name") or ""
        if len(name) > 63:
            causes.append(validation.invalid_value("metadata.name", name, "must be no more than 63 characters"))
        template_spec = ((new.get("spec") or {}).get("template") or {}).get("spec") or {}
        causes.extend(pods.template_causes(template_spec, "spec.template.spec"))
        restart = template_spec.get("restartPolicy")
        if restart not in ("OnFailure", "Never"):
            causes.append(
                errors.field_cause(
                    "FieldValueNotSupported" if restart else "FieldValueRequired",
                    "spec.template.spec.restartPolicy",
                    f'Unsupported value: "{restart}": supported values: "OnFailure", "Never"'
                    if restart
                    else 'Required value: valid values: "OnFailure", "Never"',
                )
            )
        for field in ("parallelism", "completions", "backoffLimit"):
            value = (new.get("spec") or {}).get(field)
            if value is not None and (not isinstance(value, int) or value < 0):
                causes.append(validation.invalid_value(f"spec.{field}", value, "must be greater than or equal to 0"))
        return causes

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        for field in ("selector", "completions", "completionMode"):
            if field == "completions" and _elastic_indexed_resize(new_spec, old_spec):
                continue
            if new_spec.get(field) != old_spec.get(field):
                causes.append(
                    validation.invalid_value(
                        f"spec.{field}", "object" if field == "selector" else new_spec.get(field), "field is immutable"
                    )
                )
        if _immutable_template_part(new_spec, old) != _immutable_template_part(old_spec, old):
            causes.append(validation.invalid_value("spec.template", "object", "field is immutable"))
        return causes


_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def _immutable_template_part(spec: dict[str, Any], old_job: Object) -> Any:
    """The pod template minus what may change: on a Job that is suspended and never started, its
    scheduling directives and template labels/annotations (KEP-2926, GA 1.27; what Kueue uses to
    inject node affinity before admitting). Otherwise the whole template is immutable."""
    template = copy.deepcopy(spec.get("template") or {})
    suspended_unstarted = bool((old_job.get("spec") or {}).get("suspend")) and not (old_job.get("status") or {}).get(
        "startTime"
    )
    if suspended_unstarted:
        for key in ("labels", "annotations"):
            (template.get("metadata") or {}).pop(key, None)
        for key in _SCHEDULING_DIRECTIVES:
            (template.get("spec") or {}).pop(key, None)
    return template


def _elastic_indexed_resize(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> bool:
    """Elastic Indexed Jobs (KEP-3715, GA in 1.31): ``completions`` may change together with
    ``parallelism`` when both stay equal on an Indexed Job (what Kueue does for partial admission)."""
    return (
        new_spec.get("completionMode") == "Indexed"
        and old_spec.get("completions") == old_spec.get("parallelism")
        and new_spec.get("completions") == new_spec.get("parallelism")
    )
