"""The simulated control plane that runs on the emulator's Store (``gang-sim serve --scenario``).

- :mod:`.plane` builds and runs the controllers; :mod:`.attach` hooks them into an ``Emulator``
  (``/_sim/clock``); :mod:`.cluster_harness` runs both in a thread for tests and benches.
- :mod:`.base` is the level-triggered controller loop (a malformed object becomes an Event).
- :mod:`.scheduler` (filters in :mod:`.fit`, quantities in :mod:`.resources`), :mod:`.kubelet`
  (simulated runtime; local processes in :mod:`.processes` with DNS from :mod:`.resolver`),
  :mod:`.jobs` (batch/v1 Job controller).
- :mod:`.autoscaler` (cluster-autoscaler) with :mod:`.provisioner` / :mod:`.provisioning`
  (ProvisioningRequest classes and conditions) and :mod:`.scaleup` (capacity simulation).
- :mod:`.kueue` (Kueue controller manager) and :mod:`.webhooks` (its mutating webhooks).

Nothing here imports Airflow or the provider layers (import-linter contract).
"""
