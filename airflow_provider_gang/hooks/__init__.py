"""The connection and the cluster actions: where the provider's API work lives, as Airflow readers
expect of ``hooks/`` (cncf-kubernetes ``hooks/kubernetes.py`` owns its calls).

- ``gang``: ``GangHook``, an Airflow ``kubernetes`` connection turned into ``kube`` connection settings;
  the only module here that imports airflow.
- ``creation``: the owner ConfigMap first, then the reservation objects, then the members all at once
  (or their gates released), and the world size of a partially admitted gang.
- ``gate_release``: removing the gang's scheduling gate from every member, idempotent when an
  answer was lost.
- ``inspection``: what the triggers watch, whether an earlier try's gang is intact, the reservation
  just before launch, the members' logs.
- ``deletion``: ``delete_gang``, the one deletion with one error policy, used by the operator's
  teardown and withdrawal, a worker's ``on_kill`` and a trigger's ``on_kill``.
- ``precheck`` and ``cluster_fit``: what a try needs of the cluster, checked before anything is created.
- ``parallel``: many calls at once, a bounded number at a time, stopping at the first failure.
"""
