"""The cluster-autoscaler with its kwok cloud provider, grown from the scenario's node pools.

The kwok provider (sigs.k8s.io/cluster-autoscaler ``pkg/cloudprovider/kwok``, README "For local
development") reads two ConfigMaps in ``POD_NAMESPACE``: ``kwok-provider-config`` (key ``config``:
where templates come from, which node label groups nodes, which label names a GPU) and
``kwok-provider-templates`` (key ``templates``: one template Node per group, its bounds in the
``cluster-autoscaler.kwok.nodegroup/{min,max}-count`` annotations). Outside a cluster it needs
``KWOK_PROVIDER_MODE=local``. Nodes it creates are copies of their group's template, renamed
(``kwok_nodegroups.go``, ``IncreaseSize``) and annotated ``kwok.x-k8s.io/node: fake``, so the kwok
controller runs them; the templates carry no ``kubernetes.io/hostname``, which a kwok stage then sets
to each node's own name (:func:`gang_sim.testing.real.stages.node_hostname_stage`).
``--enable-provisioning-requests`` turns on the ProvisioningRequest processor (classes
``check-capacity.autoscaling.x-k8s.io`` and ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``);
the scenario's autoscaler settings map to the flags of the same meaning (``cluster-autoscaler/FAQ.md``,
"What are the parameters to CA?").

Where several pools could take a scale-up, the autoscaler chooses as ``gang-sim``'s does
(:func:`gang_sim.controllers.autoscaler.scaleup.plan_atomic`: the fewest new nodes, then the pool
first by name), not at random (CA's default expander): ``--expander=least-nodes,priority`` chains
the fewest-nodes filter with the priority expander, whose ConfigMap
``cluster-autoscaler-priority-expander`` ranks every pool by name, the first highest
(``pkg/expander/leastnodes``, ``pkg/expander/priority``; ``FAQ.md``, "What are Expanders?").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gang_sim.testing.real.nodes import NODE_GROUP_LABEL, autoscaler_templates
from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace
from gang_sim.world.cloud import ACCELERATOR_LABEL
from gang_sim.world.scenario import Scenario

BINARY = "cluster-autoscaler"
NAMESPACE = "kube-system"
_CONFIG_MAP = "kwok-provider-config"
_TEMPLATES_CONFIG_MAP = "kwok-provider-templates"
_PRIORITY_CONFIG_MAP = "cluster-autoscaler-priority-expander"
EXPANDERS = "least-nodes,priority"


def provider_configuration(scenario: Scenario) -> dict[str, Any]:
    """The kwok provider's configuration (``apiVersion: v1alpha1``, ``kwok_types.go``)."""
    gpu_types = sorted({pool.gpu_type for pool in scenario.node_pools if pool.gpu_type})
    configuration: dict[str, Any] = {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": NODE_GROUP_LABEL},
        "nodes": {"skipTaint": True},
        "configmap": {"name": _TEMPLATES_CONFIG_MAP, "key": "templates"},
    }
    if gpu_types:
        configuration["nodes"]["gpuConfig"] = {
            "gpuLabelKey": ACCELERATOR_LABEL,
            "availableGPUTypes": {gpu_type: {} for gpu_type in gpu_types},
        }
    return configuration


def pool_priorities(scenario: Scenario) -> dict[int, list[str]]:
    """The priority expander's configuration: each pool's node group (its name) by an anchored regular
    expression, the pools ranked by name, the first the highest (the expander picks the highest)."""
    names = sorted(pool.name for pool in scenario.node_pools)
    return {len(names) - index: [f"^{re.escape(name)}$"] for index, name in enumerate(names)}


def configuration_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """The two ConfigMaps the provider reads and the priority expander's, for ``scenario``'s pools."""

    def config_map(name: str, key: str, document: dict[Any, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "data": {key: yaml.safe_dump(document, sort_keys=False)},
        }

    return [
        config_map(_CONFIG_MAP, "config", provider_configuration(scenario)),
        config_map(_TEMPLATES_CONFIG_MAP, "templates", autoscaler_templates(scenario)),
        config_map(_PRIORITY_CONFIG_MAP, "priorities", pool_priorities(scenario)),
    ]


def launch(workspace: Workspace, kubeconfig: Path, scenario: Scenario) -> Launch:
    """The autoscaler: ProvisioningRequests on, the scenario's timings, no leader election; its
    ``/health-check`` on a held port answers once it serves."""
    settings = scenario.autoscaler
    address = f"{LOOPBACK}:{workspace.ports.reserve()}"
    command = [
        str(workspace.binaries.path(BINARY)),
        "--cloud-provider=kwok",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NAMESPACE}",
        "--enable-provisioning-requests=true",
        f"--expander={EXPANDERS}",
        "--leader-elect=false",
        f"--address={address}",
        # At most 2 s: tests wait on the autoscaler's loop in real time (CA's default is 10 s).
        f"--scan-interval={max(1, min(2, int(settings.scan_interval_seconds)))}s",
        f"--scale-down-unneeded-time={int(settings.scale_down_unneeded_seconds)}s",
        f"--provisioning-request-initial-backoff-time={int(settings.initial_backoff_seconds)}s",
        f"--provisioning-request-max-backoff-time={int(settings.max_backoff_seconds)}s",
        "--max-node-provision-time=2m",
        "--kube-client-qps=100",
        "--kube-client-burst=200",
        "--logtostderr=true",
        "--v=2",
    ]
    environment = {"KWOK_PROVIDER_MODE": "local", "KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE}
    return Launch(BINARY, command, health_url=f"http://{address}/health-check", environment=environment)
