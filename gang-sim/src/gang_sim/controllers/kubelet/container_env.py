"""The environment the simulated kubelet builds for a container, as the real one does when it
creates the container (kubelet ``makeEnvironmentVariables``, ``pkg/kubelet/kubelet_pods.go``).

Sources, in the container's ``env`` order (a later entry of the same name wins):

- ``value`` (``$(VAR)`` references are not expanded);
- ``valueFrom.fieldRef`` (downward API): ``metadata.name``, ``metadata.namespace``, ``metadata.uid``,
  ``metadata.labels['k']``, ``metadata.annotations['k']``, ``spec.nodeName``,
  ``spec.serviceAccountName``, ``status.podIP``, ``status.hostIP``;
- ``valueFrom.configMapKeyRef``: key ``key`` of ConfigMap ``name`` in the pod's namespace, read from
  the Store when the container starts (env from a ConfigMap is never updated in a running container,
  https://kubernetes.io/docs/concepts/configuration/configmap/#configmaps-and-pods). A missing
  ConfigMap or key with ``optional`` not true is a :class:`ContainerConfigError` carrying upstream's
  message (``configmap "<name>" not found``, ``couldn't find key <key> in ConfigMap <ns>/<name>``);
  the kubelet then keeps the container ``Waiting`` with reason ``CreateContainerConfigError`` and
  retries. With ``optional: true`` the variable is left out.

Not supported (``ValueError`` naming the entry): ``secretKeyRef``, ``resourceFieldRef``,
``fileKeyRef``. ``envFrom`` is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gang_sim.apiserver.errors import ApiError

Obj = dict[str, Any]
ConfigMapLookup = Callable[[str, str], Obj | None]
"""``lookup(namespace, name)``: the ConfigMap, or ``None`` when it does not exist."""

CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ContainerConfigError(Exception):
    """The container's configuration cannot be built yet (kubelet ``ErrCreateContainerConfig``);
    ``str(error)`` is upstream's message. The kubelet retries: the object may appear later."""


def config_map_in(store: Any, namespace: str, name: str) -> Obj | None:
    """ConfigMap ``namespace/name`` from ``store`` (a ``gang_sim.apiserver.store.Store``: what the kubelet's
    ConfigMap manager would fetch), ``None`` when absent."""
    try:
        return dict(store.get("v1/configmaps", name, namespace))
    except ApiError as error:
        if error.code == 404:
            return None
        raise


def field_value(pod: Obj, path: str, pod_ip: str) -> str:
    """The downward-API value of ``fieldRef.fieldPath``; ValueError for unsupported paths."""
    metadata = pod.get("metadata") or {}
    simple = {
        "metadata.name": metadata.get("name", ""),
        "metadata.namespace": metadata.get("namespace", ""),
        "metadata.uid": metadata.get("uid", ""),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    match = _FIELD.match(path)
    if match:
        return str((metadata.get(match.group(1)) or {}).get(match.group(2), ""))
    raise ValueError(f"unsupported downward API fieldPath {path!r}")


def config_map_value(namespace: str, reference: Obj, lookup: ConfigMapLookup) -> str | None:
    """The value a ``configMapKeyRef`` names; ``None`` when it is optional and absent; raises
    :class:`ContainerConfigError` when it is required and absent."""
    name, key = str(reference.get("name", "")), str(reference.get("key", ""))
    optional = reference.get("optional") is True
    config_map = lookup(namespace, name)
    if config_map is None:
        if optional:
            return None
        raise ContainerConfigError(f'configmap "{name}" not found')
    data = config_map.get("data") or {}
    if key not in data:
        if optional:
            return None
        raise ContainerConfigError(f"couldn't find key {key} in ConfigMap {namespace}/{name}")
    return str(data[key])


def container_environment(pod: Obj, container: Obj, pod_ip: str, lookup: ConfigMapLookup) -> dict[str, str]:
    """The container's variables (module docstring); raises :class:`ContainerConfigError` or
    ``ValueError`` (unsupported source)."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
            continue
        source = item.get("valueFrom") or {}
        if "fieldRef" in source:
            env[item["name"]] = field_value(pod, source["fieldRef"]["fieldPath"], pod_ip)
        elif "configMapKeyRef" in source:
            value = config_map_value(namespace, source["configMapKeyRef"], lookup)
            if value is not None:
                env[item["name"]] = value
        elif source:
            raise ValueError(f"env {item.get('name')!r}: only value, fieldRef and configMapKeyRef are supported")
        else:
            env[item["name"]] = ""
    return env


def config_errors(pod: Obj, lookup: ConfigMapLookup) -> dict[str, str]:
    """Upstream's message for each container whose ``configMapKeyRef`` env cannot be resolved now
    (its first failing entry, as ``makeEnvironmentVariables`` stops there); empty when all can."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    errors: dict[str, str] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for item in container.get("env") or []:
            reference = (item.get("valueFrom") or {}).get("configMapKeyRef")
            if reference is None:
                continue
            try:
                config_map_value(namespace, reference, lookup)
            except ContainerConfigError as error:
                errors[str(container["name"])] = str(error)
                break
    return errors
