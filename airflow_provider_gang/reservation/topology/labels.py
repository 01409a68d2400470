"""Well-known node labels that name a place in the data centre.

GKE labels the VMs of its AI Hypercomputer machine types with their physical place
(https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas):
``cloud.google.com/gce-topology-block`` (sub-blocks on one network fabric),
``cloud.google.com/gce-topology-subblock`` (a sub-block, or rack: hosts one switch apart) and
``cloud.google.com/gce-topology-host``; every node has ``kubernetes.io/hostname``
(https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetesiohostname), the lowest
level Kueue's Topology Aware Scheduling places pods on.
"""

from __future__ import annotations

BLOCK = "cloud.google.com/gce-topology-block"
SUBBLOCK = "cloud.google.com/gce-topology-subblock"
HOST = "cloud.google.com/gce-topology-host"
HOSTNAME = "kubernetes.io/hostname"
GKE_LEVELS = (BLOCK, SUBBLOCK, HOST)
"""GKE's levels, widest first."""
