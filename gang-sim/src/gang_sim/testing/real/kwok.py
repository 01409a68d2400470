"""The kwok controller for one control plane: the fake kubelet of every node annotated
``kwok.x-k8s.io/node: fake`` (the scenario's nodes and those the cluster-autoscaler adds).

It plays the stages of :mod:`.stages` (its own, copied from its module by ``make real-cluster``, and
the gang member stages) from a ``--config`` file in the workspace, gives pods IPs from
``--cidr`` and serves its fake kubelet API on a held loopback port (``--server-address``); flags from
sigs.k8s.io/kwok ``pkg/kwok/cmd/root.go``. The start waits on what it does, not on its ``/healthz``:
the scenario's nodes turning Ready.
"""

from __future__ import annotations

from pathlib import Path

from gang_sim.testing.real import nodes, stages
from gang_sim.testing.real.ports import LOOPBACK
from gang_sim.testing.real.processes import Launch
from gang_sim.testing.real.workspace import Workspace

POD_CIDR = "10.244.0.0/16"
NODE_IP = "10.244.0.1"


def launch(workspace: Workspace, kubeconfig: Path) -> Launch:
    configuration = stages.write_configuration(workspace.binaries.manifests, workspace.directory / "kwok.yaml")
    command = [
        str(workspace.binaries.path("kwok")),
        f"--kubeconfig={kubeconfig}",
        f"--config={configuration}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={nodes.KWOK_MANAGED_SELECTOR}",
        f"--server-address={LOOPBACK}:{workspace.ports.reserve()}",
        f"--node-ip={NODE_IP}",
        f"--cidr={POD_CIDR}",
    ]
    return Launch("kwok", command)
