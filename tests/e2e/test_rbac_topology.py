"""``deploy/rbac.yaml``'s topology ClusterRoles are exactly what a gang with a topology asks for beyond
its mode's rules (``hooks.precheck.NEEDS``' topology-only permissions): listing nodes and the pods of
every namespace in any mode, and for kueue reading its flavors and their Topology."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.hooks.precheck import permissions_needed
from airflow_provider_gang.operators import GangTrainingOperator
from tests.e2e.test_rbac import MODES, Grant, documents, gang_arguments

TOPOLOGY_LABEL = "airflow-gang.io/topology"


@pytest.mark.parametrize("mode", MODES)
def test_the_topology_cluster_roles_grant_exactly_what_a_topology_gang_asks_for_beyond_its_mode(mode: str) -> None:
    """A gang with a topology needs the mode's rules and the topology ClusterRoles of ``all`` and of
    its mode: listing nodes and pods cluster-wide, and for kueue reading flavors and Topologies."""
    arguments = {**gang_arguments(mode, "unused"), "required_topology": "cloud.google.com/gce-topology-subblock"}
    spec = GangTrainingOperator(task_id="train", **arguments).build_spec("g")
    plain = GangTrainingOperator(task_id="train", **gang_arguments(mode, "unused")).build_spec("g")

    def cluster_wide(needs: Any) -> set[Grant]:
        return {Grant(need.verb, need.resource.group, need.rbac_resource) for need in needs if need.cluster_scoped}

    extra = cluster_wide(permissions_needed(spec)) - cluster_wide(permissions_needed(plain))
    assert {need for need in permissions_needed(spec) if not need.cluster_scoped} == {
        need for need in permissions_needed(plain) if not need.cluster_scoped
    }
    granted: set[Grant] = set()
    for role in documents():
        if role["kind"] == "ClusterRole" and role["metadata"]["labels"].get(TOPOLOGY_LABEL) in ("all", mode):
            for rule in role["rules"]:
                granted |= {
                    Grant(verb, group, resource)
                    for verb in rule["verbs"]
                    for group in rule["apiGroups"]
                    for resource in rule["resources"]
                }
    assert extra == granted


def test_the_topology_roles_are_a_cluster_role_and_binding_for_every_mode_and_for_kueue() -> None:
    topology = [doc for doc in documents() if TOPOLOGY_LABEL in doc["metadata"]["labels"]]
    assert sorted((doc["kind"], doc["metadata"]["labels"][TOPOLOGY_LABEL]) for doc in topology) == [
        ("ClusterRole", "all"),
        ("ClusterRole", "kueue"),
        ("ClusterRoleBinding", "all"),
        ("ClusterRoleBinding", "kueue"),
    ]
