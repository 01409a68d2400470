"""The real control plane's feature-gate flags: the Workload API's and a scenario's alpha gates."""

from __future__ import annotations

import pytest

from gang_sim.testing.real.feature_gates import workload_api_flags

TOPOLOGY = "TopologyAwareWorkloadScheduling"


@pytest.mark.parametrize(
    ("enabled", "apiserver", "gates", "flags"),
    [
        pytest.param(False, True, (), [], id="off-nothing"),
        pytest.param(
            True,
            True,
            (),
            ["--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true"],
            id="apiserver-serves-the-api",
        ),
        pytest.param(True, False, (), ["--feature-gates=GenericWorkload=true"], id="scheduler-gate-only"),
        pytest.param(
            True,
            False,
            (TOPOLOGY,),
            ["--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"],
            id="topology-with-its-dependency",
        ),
    ],
)
def test_flags(enabled: bool, apiserver: bool, gates: tuple[str, ...], flags: list[str]) -> None:
    assert workload_api_flags(enabled, apiserver=apiserver, gates=gates) == flags


def test_topology_without_the_workload_api_is_refused_naming_the_dependency() -> None:
    with pytest.raises(ValueError, match="TopologyAwareWorkloadScheduling needs GenericWorkload"):
        workload_api_flags(False, apiserver=True, gates=(TOPOLOGY,))
