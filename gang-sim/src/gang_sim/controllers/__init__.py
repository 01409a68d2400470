"""The simulated control plane that runs on the emulator's Store (``gang-sim serve --scenario``).

- :mod:`.plane` builds and runs the controllers; :mod:`.attach` hooks them into an ``Emulator``
  (``/_sim/clock``); :mod:`.node_registration` creates a booted node's Node object.
- :mod:`.base` is the level-triggered controller loop (a malformed object becomes an Event).
- :mod:`.scheduler` (filters in :mod:`.fit`), :mod:`.kubelet` (a package: the kubelet controller,
  its simulated runtime and local processes, container environment, pod status, termination
  messages and graceful shutdown), :mod:`.jobs` (batch/v1 Job controller), :mod:`.preemption` (GKE
  spot termination notices).
- :mod:`.autoscaler` (cluster-autoscaler, ProvisioningRequest classes and conditions, scale-up
  estimates).
- :mod:`.kueue` (Kueue controller manager) and :mod:`.webhooks` (its mutating webhooks).

Controllers read the cluster through :mod:`..world` (scenario, cloud, clock) and
:mod:`..apiserver`, never the other way round (``lint-imports``).
"""
