"""A real Kubernetes control plane built from Go modules (``make real-cluster``), started on loopback.

The one public entry point is :class:`RealCluster` (with :func:`find` for the built binaries and
:class:`BinariesMissing` when they are not); ``gang-sim real`` runs it from the command line.
"""

from gang_sim.testing.real.binaries import Binaries, BinariesMissing, find
from gang_sim.testing.real.cluster import RealCluster

__all__ = ["Binaries", "BinariesMissing", "RealCluster", "find"]
