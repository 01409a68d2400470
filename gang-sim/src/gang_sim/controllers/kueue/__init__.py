"""Simulated Kueue: the controller manager (:mod:`.manager`, the only module that talks to the Store)
and its pure helpers, which read snapshots (:mod:`.snapshot`) and return patches (:mod:`.patches`):
quota (:mod:`.quota`, :mod:`.pending`, :mod:`.scheduler`), the Workload lifecycle (:mod:`.lifecycle`),
integrations (:mod:`.workloads`, :mod:`.integrations`, :mod:`.starter`), the ProvisioningRequest
admission check (:mod:`.checks`) and queue status (:mod:`.queues`)."""
