"""``gang-sim``: a Kubernetes API emulator plus simulated controllers, for tests and the demo.

Four layers, each importing only the ones below it (``lint-imports`` checks it):

- :mod:`.cli` (the ``gang-sim`` command) and :mod:`.testing` (harnesses running the emulator in a
  background thread, a pytest plugin, :func:`~.testing.eventually.eventually`);
- :mod:`.controllers`: what runs around a real apiserver (scheduler, kubelet, Job controller,
  cluster-autoscaler with ProvisioningRequests in :mod:`.controllers.autoscaler`, Kueue in
  :mod:`.controllers.kueue`);
- :mod:`.world`: the scenario, the simulated cloud and simulated time;
- :mod:`.apiserver`: an in-memory kube-apiserver served over HTTPS by aiohttp, which the official
  ``kubernetes`` and ``kubernetes_asyncio`` clients and ``kubectl`` use unchanged through the
  kubeconfig it writes.

What the emulator does *not* model is listed in the :mod:`.apiserver.server` module docstring
("Not modelled"); ``tests/contract/`` checks that the rest answers like a real apiserver (it also
runs against the real control plane of :mod:`.testing.real`, which ``make real-cluster`` builds).

This package imports nothing from Airflow or the provider layers, and its runtime dependencies
beyond the provider's (``jsonschema``, ``cryptography``, ``common-expression-language``) come with
the ``airflow-provider-gang[sim]`` extra.
"""
