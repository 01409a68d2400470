"""Topology-aware gangs: every member in one domain of a node label (a block, a rack, a host group).

- :mod:`.labels`: the well-known topology labels (GKE's ``gce-topology-*``, ``kubernetes.io/hostname``);
- :mod:`.pins`: :class:`~.pins.Placement`, the domains a ``gates`` or ``provisioning_request`` gang's
  members are pinned to (part of the try's ``GangSpec``, a stored format);
- :mod:`.room`: what the nodes hold - a snapshot of nodes, their allocatable and the pods bound to them,
  read as room for members;
- :mod:`.choice`: the domain chosen for a gang before anything of it is created (its decision order);
- :mod:`.ranks`: ranks in topology order (consecutive ranks on one host), and where each rank ran.

Pure, like all of ``reservation``: the hooks read nodes and pods, these modules decide.
"""
