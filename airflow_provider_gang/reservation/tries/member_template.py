"""The member pod template an operator's arguments describe.

``image``/``command``/``args``/``env`` build a one-container template; ``pod_template`` (a Pod,
PodTemplate, PodTemplateSpec or PodSpec dict) or ``pod_template_file`` give a full one, to which
``command``/``args``/``env`` are applied on the first container (the trainer), the way the
KubernetesPodOperator applies its arguments over ``pod_template_file``. Shapes are normalised and the
file is read by ``reservation.template``; resources, rank environment, labels and scheduling are added
later by ``reservation.manifests`` from the ``GangSpec``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_gang.reservation import template as pod_templates
from airflow_provider_gang.reservation.spec import DEFAULT_GPU_RESOURCE

TRAINER_CONTAINER = "trainer"


def build_member_template(
    *,
    image: str | None,
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    env: Mapping[str, str] | None,
    pod_template: Mapping[str, Any] | None,
    pod_template_file: str | None,
    gpus: int = 0,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
) -> dict[str, Any]:
    """A PodTemplateSpec dict (``{"metadata": ..., "spec": ...}``) with the arguments applied.

    Members asking for GPUs tolerate the ``<gpu_resource>:NoSchedule`` taint GPU node pools carry,
    as Kubernetes' ``ExtendedResourceToleration`` admission plugin (enabled on GKE) would add.
    Raises ``GangSpecError`` when the file cannot be read or the template has an unusable shape.
    """
    if pod_template_file:
        spec_template = pod_templates.load_pod_template_file(pod_template_file)
    elif pod_template is not None:
        spec_template = pod_templates.to_pod_template_spec(pod_template)
    else:
        spec_template = {"metadata": {}, "spec": {"containers": [{"name": TRAINER_CONTAINER, "image": image}]}}
    containers = spec_template["spec"].get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        return spec_template  # GangSpec validation names the missing containers (no tolerations needed)
    trainer = containers[0]
    if command is not None:
        trainer["command"] = list(command)
    if args is not None:
        trainer["args"] = list(args)
    if env:
        kept = [item for item in trainer.get("env") or [] if item.get("name") not in env]
        trainer["env"] = kept + [{"name": name, "value": value} for name, value in env.items()]
    if gpus and isinstance(gpus, int) and isinstance(gpu_resource, str):
        toleration = {"key": gpu_resource, "operator": "Exists", "effect": "NoSchedule"}
        tolerations = list(spec_template["spec"].get("tolerations") or [])
        if toleration not in tolerations:
            spec_template["spec"]["tolerations"] = [*tolerations, toleration]
    return spec_template
