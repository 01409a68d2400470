"""The simulated cluster-autoscaler: scale-up for pending pods and ProvisioningRequests.

- :mod:`.cluster_autoscaler`: the scan loop (``--scan-interval``), as ``cluster-autoscaler/core/static_autoscaler.go``.
- :mod:`.provisioner`: the ProvisioningRequest classes (``check-capacity.autoscaling.x-k8s.io``,
  ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``, GKE ``queued-provisioning.gke.io``), as
  ``cluster-autoscaler/provisioningrequest/``; :mod:`.provisioning` holds their condition helpers.
- :mod:`.node_groups`: the node groups as the ProvisioningRequest classes see them (a protocol the
  autoscaler implements, after ``cloudprovider.NodeGroup`` in ``cluster-autoscaler/cloudprovider/cloud_provider.go``).
- :mod:`.scaleup`: which node groups a set of pods would need (a binpacking estimate).
"""
