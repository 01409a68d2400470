"""Pod admission: defaults, QoS class, scheduling gates and the pod-update immutability rules.

Upstream references: ``pkg/registry/core/pod/strategy.go`` (status reset to Pending on create, the
``PodScheduled=False/SchedulingGated`` condition for gated pods, KEP-3521) and
``pkg/apis/core/validation`` ``ValidatePodUpdate`` / ``validatePodSchedulingGates``:

- only ``containers[*].image``, ``initContainers[*].image``, ``activeDeadlineSeconds``, additions
  to ``tolerations`` and removal of ``schedulingGates`` may change after create;
- scheduling gates can only be set at create time and then only removed;
- while a pod is still gated, ``nodeSelector`` may gain keys (no changes or deletions) and required
  node affinity terms may gain match expressions (KEP-3838 "mutable pod scheduling directives");
- ``spec.nodeName`` is set only through the ``binding`` subresource, never while gated.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from gang_sim.apiserver import errors, validation
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.kinds.base import Object, Strategy
from gang_sim.apiserver.registry import ResourceType

TERMINAL_PHASES = ("Succeeded", "Failed")
_MUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed / Burstable / BestEffort from container requests and limits (upstream ``GetPodQOS``)."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_seen = limits_seen = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_seen = requests_seen or bool(requests)
        limits_seen = limits_seen or bool(limits)
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed and containers else "Burstable"


def template_spec_defaults(spec: dict[str, Any]) -> None:
    """Defaults upstream's ``SetDefaults_PodSpec`` gives every pod spec, templates included (not
    ``restartPolicy``: Jobs must state it; PodTemplates and Pods default it themselves)."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if isinstance(container, dict):
            _container_defaults(container)


def template_causes(spec: Any, path: str) -> list[Cause]:
    """The essential pod-spec checks for a template at ``path`` (containers named, with images)."""
    spec = spec if isinstance(spec, dict) else {}
    causes: list[Cause] = []
    if not spec.get("containers"):
        causes.append(validation.required(f"{path}.containers"))
    for kind in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(kind) or []):
            if not container.get("name"):
                causes.append(validation.required(f"{path}.{kind}[{index}].name"))
            else:
                causes.extend(validation.validate_name(container["name"], "label", f"{path}.{kind}[{index}].name"))
            if not container.get("image"):
                causes.append(validation.required(f"{path}.{kind}[{index}].image"))
    return causes


def _container_defaults(container: dict[str, Any]) -> None:
    image = str(container.get("image") or "")
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    container.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})


def _default_tolerations(spec: dict[str, Any]) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready/unreachable nodes for 300 s."""
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(
            t.get("key") in (taint, None, "")
            and t.get("effect") in ("NoExecute", None, "")
            and (t.get("key") or t.get("operator") == "Exists")
            for t in tolerations
        ):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})


class PodTemplateStrategy(Strategy):
    """PodTemplates: their pod spec is defaulted (incl. ``restartPolicy: Always``) and must name containers."""

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        self.prepare_update(new, new, resource_type)

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        spec = new.setdefault("template", {}).setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("restartPolicy", "Always")
            template_spec_defaults(spec)

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        causes = super().validate_create(new, resource_type, field_validation)
        return causes + template_causes((new.get("template") or {}).get("spec"), "template.spec")

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        return causes + template_causes((new.get("template") or {}).get("spec"), "template.spec")


class PodStrategy(Strategy):
    """See module docstring."""

    tracks_generation = True  # pod generation tracking (KEP-5067), on by default in current releases

    def prepare_create(self, new: Object, resource_type: ResourceType) -> None:
        spec = new.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        template_spec_defaults(spec)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        _default_tolerations(spec)
        status: dict[str, Any] = {"phase": "Pending", "qosClass": qos_class(spec)}
        if spec.get("schedulingGates"):
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": _now(),
                }
            ]
        new["status"] = status

    def validate_create(self, new: Object, resource_type: ResourceType, field_validation: str) -> list[Cause]:
        causes = super().validate_create(new, resource_type, field_validation)
        spec = new.get("spec") or {}
        causes.extend(template_causes(spec, "spec"))
        if spec.get("restartPolicy") not in ("Always", "OnFailure", "Never"):
            causes.append(
                errors.field_cause(
                    "FieldValueNotSupported",
                    "spec.restartPolicy",
                    f'Unsupported value: "{spec.get("restartPolicy")}": supported values: '
                    '"Always", "OnFailure", "Never"',
                )
            )
        gates = [g.get("name", "") for g in spec.get("schedulingGates") or []]
        for index, gate in enumerate(gates):
            if gates.index(gate) != index:
                causes.append(
                    errors.field_cause(
                        "FieldValueDuplicate", f"spec.schedulingGates[{index}]", f'Duplicate value: "{gate}"'
                    )
                )
        if gates and spec.get("nodeName"):
            causes.append(
                validation.forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared")
            )
        return causes

    def prepare_update(self, new: Object, old: Object, resource_type: ResourceType) -> None:
        super().prepare_update(new, old, resource_type)
        spec = new.setdefault("spec", {})
        for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
            if isinstance(container, dict):
                _container_defaults(container)
        for defaulted in (
            "restartPolicy",
            "dnsPolicy",
            "schedulerName",
            "terminationGracePeriodSeconds",
            "securityContext",
            "enableServiceLinks",
            "priority",
            "preemptionPolicy",
        ):
            if defaulted in old.get("spec", {}) and defaulted not in spec:
                spec[defaulted] = copy.deepcopy(old["spec"][defaulted])
        _default_tolerations(spec)  # the admission plugin runs on updates too

    def validate_update(
        self, new: Object, old: Object, resource_type: ResourceType, field_validation: str
    ) -> list[Cause]:
        causes = super().validate_update(new, old, resource_type, field_validation)
        new_spec, old_spec = copy.deepcopy(new.get("spec") or {}), copy.deepcopy(old.get("spec") or {})
        old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
        new_gates = [g.get("name") for g in new_spec.get("schedulingGates") or []]
        for gate in new_gates:
            if gate not in old_gates:
                causes.append(
                    validation.forbidden(
                        "spec.schedulingGates", f"only deletion is allowed, but found new scheduling gate '{gate}'"
                    )
                )
        if old_gates:
            causes.extend(_gated_directive_causes(new_spec, old_spec))
            for directive in ("nodeSelector", "affinity"):
                new_spec.pop(directive, None)
                old_spec.pop(directive, None)
        old_tolerations = old_spec.get("tolerations") or []
        if all(t in (new_spec.get("tolerations") or []) for t in old_tolerations):
            new_spec.pop("tolerations", None)
            old_spec.pop("tolerations", None)
        for spec in (new_spec, old_spec):
            spec.pop("schedulingGates", None)
            spec.pop("activeDeadlineSeconds", None)
            for kind in ("containers", "initContainers"):
                for container in spec.get(kind) or []:
                    container.pop("image", None)
        if new_spec != old_spec:
            causes.append(validation.forbidden("spec", _MUTABLE_MESSAGE))
        return causes

    def validate_status_update(self, new: Object, old: Object, resource_type: ResourceType) -> list[Cause]:
        old_phase, new_phase = (old.get("status") or {}).get("phase"), (new.get("status") or {}).get("phase")
        if old_phase in TERMINAL_PHASES and new_phase != old_phase:
            return [
                validation.forbidden(
                    "status.phase", f"cannot transition from terminal phase {old_phase} to {new_phase}"
                )
            ]
        return []


def _gated_directive_causes(new_spec: dict[str, Any], old_spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    old_selector, new_selector = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
    if any(new_selector.get(k) != v for k, v in old_selector.items()):
        causes.append(
            validation.invalid_value(
                "spec.nodeSelector",
                "object",
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            )
        )

    def terms(spec: dict[str, Any]) -> list[Any] | None:
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        return None if required is None else list(required.get("nodeSelectorTerms") or [])

    old_terms, new_terms = terms(old_spec), terms(new_spec)
    if old_terms is not None:
        tightened = (
            new_terms is not None
            and len(new_terms) == len(old_terms)
            and all(
                all(
                    expression in (new_term.get(part) or [])
                    for part in ("matchExpressions", "matchFields")
                    for expression in old_term.get(part) or []
                )
                for old_term, new_term in zip(old_terms, new_terms, strict=True)
            )
        )
        if not tightened:
            causes.append(
                validation.invalid_value(
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                    "object",
                    "only additions to the existing nodeSelectorTerms' matchExpressions/matchFields are allowed",
                )
            )
    return causes


def bound(pod: Object, node_name: str) -> Object:
    """The pod after a ``Binding`` to ``node_name``; 409 if bound already, 422 while gated."""
    name = pod["metadata"]["name"]
    if (pod.get("spec") or {}).get("schedulingGates"):
        raise errors.invalid(
            "Pod", name, [validation.forbidden("spec.schedulingGates", "pod has non-empty scheduling gates")]
        )
    if (pod.get("spec") or {}).get("nodeName"):
        raise errors.conflict(
            "pods/binding", name, why=f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        )
    new = copy.deepcopy(pod)
    new["spec"]["nodeName"] = node_name
    conditions = [c for c in new.setdefault("status", {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": _now()})
    new["status"]["conditions"] = conditions
    return new
