"""The simulated kubelet: one controller for every node, and what it runs pods with.

Layers, each importing only those below it (``lint-imports``):

- :mod:`.controller`: :class:`~.controller.Kubelet`, the pod lifecycle on bound pods (start, run,
  exit, restarts, deletion, orphaned pods);
- :mod:`.shutdown`: graceful node shutdown when a node gets a termination notice;
- :mod:`.pod_status` (container statuses and pod conditions, as the kubelet's status manager writes
  them) and :mod:`.processes` (images run as local processes, each pod on its own loopback IP);
- :mod:`.termination_messages` (``state.terminated.message``), :mod:`.container_env` (the
  environment, ``configMapKeyRef`` resolved from the store) and :mod:`.resolver` (pod and headless
  Service names for local processes);
- :mod:`.simulated_runtime` (the ``sim.gang.dev/`` annotations of a simulated container) and
  :mod:`.resolver_shims` (the name-resolution shims handed to local processes).

Upstream: ``pkg/kubelet/`` of kubernetes/kubernetes (each module cites the files it follows).
"""
