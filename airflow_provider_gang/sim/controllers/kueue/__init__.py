"""Simulated Kueue: quota (:mod:`.quota`), integrations (:mod:`.workloads`, :mod:`.starter`), the
ProvisioningRequest admission check (:mod:`.checks`) and the controller manager (:mod:`.manager`)."""
