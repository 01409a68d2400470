"""What the emulated cluster is made of and what happens to it: scenarios, the cloud, time.

- :mod:`.scenario` loads a scenario (YAML; the named ones in ``scenarios/``), with field parsing in
  :mod:`.scenario_fields`, objects to create in :mod:`.scenario_objects` and spot preemptions in
  :mod:`.scenario_preemptions`.
- :mod:`.cloud` is the simulated cloud provider behind the cluster-autoscaler (node pools, zone
  quota, stockouts, reservations, billing).
- :mod:`.clock` is simulated time (scaled or manual); :mod:`.resources` parses resource quantities;
  :mod:`.images` says which images run as local processes.

This layer sits between the controllers and the API server: it may use :mod:`..apiserver`, never
:mod:`..controllers` (``lint-imports``).
"""
