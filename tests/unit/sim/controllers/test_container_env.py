"""The container environment the simulated kubelet builds (``gang_sim.controllers.kubelet.container_env``): each
source, upstream's ``CreateContainerConfigError`` messages, ``optional`` references."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.store import Store
from gang_sim.controllers.kubelet import container_env

CONFIG_MAPS = {("ml", "world"): {"data": {"size": "2"}}, ("ml", "empty"): {}}


def lookup(namespace: str, name: str) -> dict[str, Any] | None:
    return CONFIG_MAPS.get((namespace, name))


def pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "member-1", "namespace": "ml", "uid": "u1", "annotations": {"rank": "1"}},
        "spec": {"nodeName": "node-a", "containers": list(containers)},
    }


def ref(name: str, key: str = "size", **extra: Any) -> dict[str, Any]:
    return {"valueFrom": {"configMapKeyRef": {"name": name, "key": key, **extra}}}


def test_every_supported_source_in_order() -> None:
    container = {
        "name": "main",
        "env": [
            {"name": "A", "value": "1"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['rank']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "WORLD_SIZE", **ref("world")},
            {"name": "EMPTY"},
            {"name": "A", "value": "2"},  # a later entry of the same name wins
        ],
    }
    env = container_env.container_environment(pod(container), container, "127.9.0.2", lookup)
    assert env == {"A": "2", "POD": "member-1", "RANK": "1", "IP": "127.9.0.2", "WORLD_SIZE": "2", "EMPTY": ""}


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (ref("missing"), 'configmap "missing" not found'),
        (ref("world", "WORLD_SIZE"), "couldn't find key WORLD_SIZE in ConfigMap ml/world"),
        (ref("empty"), "couldn't find key size in ConfigMap ml/empty"),
        (ref("missing", optional=False), 'configmap "missing" not found'),
    ],
    ids=["no-config-map", "no-key", "no-data", "optional-false"],
)
def test_a_required_missing_value_is_a_container_config_error(reference: dict[str, Any], message: str) -> None:
    container = {"name": "main", "env": [{"name": "WORLD_SIZE", **reference}]}
    with pytest.raises(container_env.ContainerConfigError) as caught:
        container_env.container_environment(pod(container), container, "127.9.0.2", lookup)
    assert str(caught.value) == message
    assert container_env.config_errors(pod(container), lookup) == {"main": message}


@pytest.mark.parametrize(
    "reference", [ref("missing", optional=True), ref("world", "nope", optional=True)], ids=["no-config-map", "no-key"]
)
def test_an_optional_missing_value_leaves_the_variable_out(reference: dict[str, Any]) -> None:
    container = {"name": "main", "env": [{"name": "A", "value": "1"}, {"name": "WORLD_SIZE", **reference}]}
    assert container_env.container_environment(pod(container), container, "127.9.0.2", lookup) == {"A": "1"}
    assert container_env.config_errors(pod(container), lookup) == {}


def test_config_errors_name_each_container_with_its_first_failing_entry() -> None:
    first = {"name": "first", "env": [{"name": "X", **ref("missing")}, {"name": "Y", **ref("world", "other")}]}
    fine = {"name": "fine", "env": [{"name": "X", **ref("world")}, {"name": "POD", "value": "p"}]}
    second = {"name": "second", "env": [{"name": "Y", **ref("world", "other")}]}
    assert container_env.config_errors(pod(first, fine, second), lookup) == {
        "first": 'configmap "missing" not found',
        "second": "couldn't find key other in ConfigMap ml/world",
    }


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}},
    ],
    ids=["secret", "unsupported-field"],
)
def test_unsupported_sources_are_refused_by_name(entry: dict[str, Any]) -> None:
    container = {"name": "main", "env": [entry]}
    with pytest.raises(ValueError, match=r"env 'S'|fieldPath 'status\.phase'"):
        container_env.container_environment(pod(container), container, "127.9.0.2", lookup)


def test_config_map_in_reads_the_store() -> None:
    store = Store()
    store.create(
        "v1/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "world"}, "data": {"size": "3"}},
        "default",
    )
    assert container_env.config_map_in(store, "default", "world")["data"] == {"size": "3"}  # type: ignore[index]
    assert container_env.config_map_in(store, "default", "other") is None


def test_config_map_in_passes_other_errors_on() -> None:
    class Broken:
        def get(self, *args: Any) -> Any:
            raise ApiError(500, "InternalError", "etcd is down")

    with pytest.raises(ApiError, match="etcd is down"):
        container_env.config_map_in(Broken(), "ml", "world")
