"""The member pod template: accepted shapes, normalisation and checks.

Users hand us a pod template in one of four shapes, all plain dicts in the Kubernetes wire format
(camelCase keys; the operator layer converts a ``V1Pod`` object with the client's
``sanitize_for_serialization`` before it gets here):

- a ``Pod`` (``{"kind": "Pod", "metadata": ..., "spec": ...}``; ``status`` and server-set metadata
  are dropped),
- a ``PodTemplate`` (``{"kind": "PodTemplate", "template": {...}}``),
- a ``PodTemplateSpec`` (``{"metadata": ..., "spec": ...}``),
- a bare ``PodSpec`` (``{"containers": [...]}``).

:func:`to_pod_template_spec` turns each into a ``PodTemplateSpec`` dict with only ``labels`` and
``annotations`` kept in its metadata (what a ``PodTemplate`` and a Kueue podSet accept).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from airflow_provider_gang.reservation import quantity
from airflow_provider_gang.reservation.errors import GangSpecError

FIELD = "pod_template"
_KEPT_METADATA = ("labels", "annotations")
_SUPPORTED_RESTART_POLICIES = (None, "Never")


def to_pod_template_spec(value: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise any accepted shape (see module docstring) to a ``PodTemplateSpec`` dict (a deep copy)."""
    if not isinstance(value, Mapping):
        shapes = "Pod, PodTemplate, PodTemplateSpec or PodSpec"
        raise GangSpecError(FIELD, f"must be a dict ({shapes}), got {type(value).__name__}")
    kind = value.get("kind")
    if kind == "PodTemplate":
        inner = value.get("template")
        if not isinstance(inner, Mapping):
            raise GangSpecError(f"{FIELD}.template", "a PodTemplate needs a 'template' with metadata and spec")
        value = inner
    elif kind not in (None, "Pod"):
        raise GangSpecError(f"{FIELD}.kind", f"{kind!r} is not a pod template; give a Pod, PodTemplate or PodSpec")
    if "containers" in value and "spec" not in value:
        return {"metadata": {}, "spec": copy.deepcopy(dict(value))}
    spec = value.get("spec")
    if not isinstance(spec, Mapping):
        raise GangSpecError(f"{FIELD}.spec", "missing; the template needs a pod spec with containers")
    metadata = value.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise GangSpecError(f"{FIELD}.metadata", "must be a mapping")
    kept = {key: copy.deepcopy(dict(metadata[key])) for key in _KEPT_METADATA if metadata.get(key)}
    return {"metadata": kept, "spec": copy.deepcopy(dict(spec))}


def parse_pod_template_yaml(text: str) -> dict[str, Any]:
    """Parse a pod template file's text (the first YAML document) and normalise it."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise GangSpecError("pod_template_file", f"is not valid YAML: {error}") from None
    if not isinstance(document, Mapping):
        raise GangSpecError("pod_template_file", "must contain a YAML mapping (a Pod, PodTemplate or PodSpec)")
    return to_pod_template_spec(document)


def load_pod_template_file(path: str | Path) -> dict[str, Any]:
    """Read and normalise a pod template file (what ``pod_template_file`` points at)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise GangSpecError("pod_template_file", f"cannot read {str(path)!r}: {error.strerror}") from None
    return parse_pod_template_yaml(text)


def check_pod_template(template: Mapping[str, Any], *, gpu_resource: str, gpus: int) -> None:
    """Check a normalised template: containers with names and images, a restart policy a gang can
    use (``Never``: a member that restarts in place would hide its failure from the gang), no
    ``nodeName`` (that bypasses the scheduler and any reservation), and no GPU count set twice."""
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise GangSpecError(FIELD, "must be a PodTemplateSpec dict; normalise it with template.to_pod_template_spec()")
    spec = template["spec"]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise GangSpecError(f"{FIELD}.spec.containers", "needs at least one container with a name and an image")
    for index, container in enumerate(containers):
        where = f"{FIELD}.spec.containers[{index}]"
        if not isinstance(container, Mapping) or not container.get("name"):
            raise GangSpecError(f"{where}.name", "every container needs a name")
        if not container.get("image"):
            raise GangSpecError(f"{where}.image", "every container needs an image")
        _check_container_resources(container, where)
    if spec.get("restartPolicy") not in _SUPPORTED_RESTART_POLICIES:
        raise GangSpecError(
            f"{FIELD}.spec.restartPolicy",
            f"{spec.get('restartPolicy')!r} would restart failed members in place; use 'Never' (or leave it unset)",
        )
    if spec.get("nodeName"):
        raise GangSpecError(f"{FIELD}.spec.nodeName", "bypasses the scheduler and the reservation; remove it")
    if gpus and container_gpus(template, gpu_resource):
        raise GangSpecError(
            "gpus", f"the template's first container already requests {gpu_resource}; set GPUs in one place only"
        )


def _check_container_resources(container: Mapping[str, Any], where: str) -> None:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise GangSpecError(f"{where}.resources", f"must be a mapping of requests and limits, got {resources!r}")
    for section in ("requests", "limits"):
        amounts = resources.get(section) or {}
        if not isinstance(amounts, Mapping):
            problem = f"must map resource names to quantities, got {amounts!r}"
            raise GangSpecError(f"{where}.resources.{section}", problem)
        for name, value in amounts.items():
            if not quantity.is_quantity(value):
                raise GangSpecError(f"{where}.resources.{section}[{name!r}]", f"{value!r} is not a Kubernetes quantity")


def container_gpus(template: Mapping[str, Any], gpu_resource: str) -> int:
    """GPUs the template's first container asks for (limit, else request), as a whole number."""
    container = template["spec"]["containers"][0]
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(gpu_resource)
        if value is not None:
            return int(quantity.parse_quantity(value))
    return 0
