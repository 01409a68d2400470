"""``gang-sim``: a Kubernetes API emulator plus simulated controllers, for tests and the demo.

An in-memory kube-apiserver (:mod:`.store`, :mod:`.object_table`, admission in :mod:`.kinds`) served
over HTTPS by aiohttp (:mod:`.api`, :class:`.server.Emulator`), which the official ``kubernetes`` and
``kubernetes_asyncio`` clients and ``kubectl`` use unchanged through the kubeconfig it writes.
:mod:`.harness` runs it in a background thread; :mod:`.cli` is the ``gang-sim`` command.
:mod:`.controllers` (scheduler, kubelet, Job, ProvisioningRequest and Kueue controllers) and
:mod:`.clock`/:mod:`.cluster`/:mod:`.scenario` simulate what runs around a real apiserver.

What the emulator does *not* model is listed in the :mod:`.server` module docstring ("Not
modelled"); ``tests/contract/`` checks that the rest answers like a real apiserver (it also runs
against one: ``tests/contract/real_apiserver.sh``).

This package imports nothing from Airflow or the provider layers (checked by ``lint-imports``).
"""
