"""Scheduler filters and quantities, table-tested."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gang_sim.controllers import fit
from gang_sim.world.resources import (
    QuantityError,
    format_quantity,
    parse_quantity,
    pod_requests,
)
from tests.builders import GPU_TAINT, GPU_TOLERATION, node, pod_spec


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", Fraction(4)),
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1k", Fraction(1000)),
        ("1e3", Fraction(1000)),
        ("0.5", Fraction(1, 2)),
        (2, Fraction(2)),
    ],
)
def test_parse_quantity(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "", "1Zi", "--1", True, None])
def test_parse_quantity_rejects(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_format_quantity() -> None:
    assert [format_quantity(Fraction(4)), format_quantity(Fraction(1, 2))] == ["4", "500m"]


def test_pod_requests_limits_default_requests_and_init_containers_take_max() -> None:
    spec = pod_spec(cpu="1", gpus=2)
    spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    requests = pod_requests(spec)
    assert requests["nvidia.com/gpu"] == 2
    assert requests["cpu"] == 3
    assert requests["pods"] == 1


GPU_NODE = node("gpu-1", gpus=1, labels={"cloud.google.com/gke-accelerator": "nvidia-l4"}, taints=[GPU_TAINT])
CPU_NODE = node("cpu-1", labels={"zone": "a"})


def _affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }


@pytest.mark.parametrize(
    ("spec", "target", "used", "failures"),
    [
        pytest.param(pod_spec(), CPU_NODE, {}, [], id="fits"),
        pytest.param(pod_spec(gpus=1), CPU_NODE, {}, ["Insufficient nvidia.com/gpu"], id="no-gpu-on-cpu-node"),
        pytest.param(
            pod_spec(gpus=1),
            GPU_NODE,
            {},
            ["node(s) had untolerated taint {nvidia.com/gpu: present}"],
            id="untolerated-gpu-taint",
        ),
        pytest.param(pod_spec(gpus=1, tolerations=[GPU_TOLERATION]), GPU_NODE, {}, [], id="tolerated"),
        pytest.param(
            pod_spec(gpus=1, tolerations=[{"operator": "Exists"}]), GPU_NODE, {}, [], id="tolerate-everything"
        ),
        pytest.param(
            pod_spec(gpus=1, tolerations=[GPU_TOLERATION]),
            GPU_NODE,
            {"nvidia.com/gpu": Fraction(1)},
            ["Insufficient nvidia.com/gpu"],
            id="gpu-taken",
        ),
        pytest.param(
            pod_spec(cpu="9", memory="40Gi"),
            CPU_NODE,
            {},
            ["Insufficient cpu", "Insufficient memory"],
            id="two-short-resources",
        ),
        pytest.param(pod_spec(nodeSelector={"zone": "b"}), CPU_NODE, {}, [fit.AFFINITY_MISMATCH], id="selector-miss"),
        pytest.param(pod_spec(nodeSelector={"zone": "a"}), CPU_NODE, {}, [], id="selector-hit"),
        pytest.param(
            pod_spec(affinity=_affinity({"key": "zone", "operator": "In", "values": ["a", "b"]})),
            CPU_NODE,
            {},
            [],
            id="affinity-in",
        ),
        pytest.param(
            pod_spec(affinity=_affinity({"key": "zone", "operator": "NotIn", "values": ["a"]})),
            CPU_NODE,
            {},
            [fit.AFFINITY_MISMATCH],
            id="affinity-notin",
        ),
        pytest.param(
            pod_spec(affinity=_affinity({"key": "gpu", "operator": "DoesNotExist"})),
            CPU_NODE,
            {},
            [],
            id="affinity-does-not-exist",
        ),
        pytest.param(
            pod_spec(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu-1"]}]}
                            ]
                        }
                    }
                }
            ),
            CPU_NODE,
            {},
            [],
            id="match-fields-name",
        ),
        pytest.param(
            pod_spec(), {**CPU_NODE, "spec": {"unschedulable": True}}, {}, ["node(s) were unschedulable"], id="cordoned"
        ),
    ],
)
def test_fit_failures(
    spec: dict[str, Any], target: dict[str, Any], used: dict[str, Fraction], failures: list[str]
) -> None:
    assert fit.fit_failures(spec, pod_requests(spec), target, used) == failures


def test_unschedulable_message_counts_and_sorts_reasons() -> None:
    message = fit.unschedulable_message(
        3,
        {
            "a": ["node(s) had untolerated taint {nvidia.com/gpu: present}"],
            "b": ["Insufficient nvidia.com/gpu"],
            "c": ["Insufficient nvidia.com/gpu"],
        },
    )
    assert message == (
        "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
        "{nvidia.com/gpu: present}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert fit.unschedulable_message(0, {}) == "no nodes available to schedule pods"
