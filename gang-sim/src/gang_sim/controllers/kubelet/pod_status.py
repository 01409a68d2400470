"""Pod status as the kubelet writes it: container statuses, the pod's conditions, and the status of a
pod whose containers cannot be configured yet (``CreateContainerConfigError``, see ``kubelet``)."""

from __future__ import annotations

from typing import Any

from gang_sim.controllers.base import Obj, set_condition, wall_time
from gang_sim.controllers.kubelet import container_env


def container_statuses(pod: Obj, state: dict[str, Any], *, ready: bool, restarts: int) -> list[Obj]:
    """One ``containerStatuses`` entry per container of ``pod``, all in ``state``."""
    return [
        {
            "name": container["name"],
            "image": container.get("image", ""),
            "imageID": "",
            "containerID": f"sim://{pod['metadata'].get('uid', '')}-{container['name']}",
            "state": state,
            "ready": ready,
            "started": "running" in state,
            "restartCount": restarts,
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]


def terminated_statuses(pod: Obj, codes: dict[str, int], *, default_code: int) -> list[Obj]:
    """The ``containerStatuses`` of ``pod`` once every container exited with its code in ``codes``
    (``default_code`` for a container without one): ``Completed`` for 0, else ``Error``."""
    statuses = container_statuses(pod, {}, ready=False, restarts=0)
    for status in statuses:
        code = codes.get(status["name"], default_code)
        status["state"] = {
            "terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": wall_time()}
        }
        status["started"] = False
    return statuses


def pod_conditions(pod: Obj, *, ready: bool, reason: str = "") -> list[Obj]:
    """The pod's conditions once its sandbox exists: Ready/ContainersReady as ``ready`` says."""
    conditions = [dict(item) for item in (pod.get("status") or {}).get("conditions") or []]
    conditions = set_condition(conditions, "PodReadyToStartContainers", "True", "", "")
    conditions = set_condition(conditions, "Initialized", "True", "", "")
    for kind in ("Ready", "ContainersReady"):
        if ready:
            conditions = set_condition(conditions, kind, "True", "", "")
        else:
            message = (
                "containers with unready status: ["
                + " ".join(container["name"] for container in (pod.get("spec") or {}).get("containers") or [])
                + "]"
            )
            conditions = set_condition(conditions, kind, "False", reason or "ContainersNotReady", message)
    for item in conditions:
        if item.get("status") == "True" and item["type"] != "PodScheduled":
            item.pop("reason", None)
            item.pop("message", None)
    return conditions


def config_error_status(pod: Obj, errors: dict[str, str], *, restarts: int) -> Obj:
    """``Pending``; each container named in ``errors`` ``Waiting`` with reason
    ``CreateContainerConfigError`` and its message, the others ``ContainerCreating``."""
    statuses = container_statuses(pod, {"waiting": {"reason": "ContainerCreating"}}, ready=False, restarts=restarts)
    for status in statuses:
        if status["name"] in errors:
            waiting = {"reason": container_env.CREATE_CONTAINER_CONFIG_ERROR, "message": errors[status["name"]]}
            status["state"] = {"waiting": waiting}
    return {"phase": "Pending", "conditions": pod_conditions(pod, ready=False), "containerStatuses": statuses}
