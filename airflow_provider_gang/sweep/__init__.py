"""Gangs whose task no longer runs: found from outside the task and withdrawn.

A try deletes its gang when it ends, and the next try of the same task instance adopts or withdraws
what a dead worker left (``reservation.tries.plan``). Nothing of that runs when the task instance
itself ends without a try that cleans up: its worker was SIGKILLed (``airflow dags test`` stops on
nothing else) and the scheduler failed it as a task without heartbeat, a user marked it failed or
successful while no trigger ran, its DAG run was deleted. Then the ProvisioningRequest, PodTemplate,
owner ConfigMap and Service stay, and once capacity appears the orphan request books GPU nodes.

Two ways out, one rule (:mod:`.verdict`):

- :mod:`.listener_actions`, called by the Airflow listener ``plugin.listener`` when a task instance
  reaches a final state (in the scheduler, the api-server or the worker), withdraws that task
  instance's gangs; when an ``airflow dags test`` run starts a gang task, it withdraws what earlier
  ``dags test`` runs of that task left when their process was killed;
- :mod:`.command` (``python -m airflow_provider_gang.sweep``, ``airflow gang sweep``) lists every
  gang of a connection's namespace with the state of its task instance and, with ``--delete``,
  withdraws those whose task instance is final or gone.

Modules: :mod:`.verdict` (pure: keep or withdraw, and why), :mod:`.airflow_state` (the metadata
database reads), :mod:`.withdrawal` (the cluster side, through ``hooks.inspection`` and
``hooks.deletion``), :mod:`.listener_actions`, :mod:`.command`.
"""
