"""The provider's deferrable triggers: they watch a gang's objects in the triggerer and yield one event.

- :mod:`.reservation` - ``ReservationTrigger``: the wait for the reservation (ProvisioningRequest,
  Kueue Workload, PodGroup or gated pods) to be granted or to fail;
- :mod:`.gang_run` - ``GangRunTrigger``: the members watched as one gang until they all finish or
  one fails;
- :mod:`.base` and :mod:`.decision_loop` - what both share: shared watches, the decision loop
  (observe -> decide -> refine -> finish) and ``on_kill``.

Airflow runs triggers in the triggerer (https://airflow.apache.org/docs/apache-airflow/stable/authoring-and-scheduling/deferring.html).
"""
