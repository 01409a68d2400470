"""The pure reservation core: what a gang is, what its objects look like, and where it stands.

Pure: no airflow, no HTTP, no asyncio, no Kubernetes client (``lint-imports`` enforces it). Time
(``now``, epoch seconds) and anything random are parameters. Objects are plain dicts in the
Kubernetes wire format (camelCase keys).

Public API (import the module, then name the function: ``decision.decide(...)``):

- ``spec``: ``GangSpec`` (frozen dataclass, validated on construction), ``MemberResources``,
  ``ReservationMode`` (``provisioning_request`` | ``kueue`` | ``gates``), ``Distributed``
  (``torch`` | ``jax``), ``GangSpecError(field, message)``.
- ``template``: ``to_pod_template_spec``, ``parse_pod_template_yaml``, ``load_pod_template_file``.
- ``quantity``: ``parse_quantity`` (Kubernetes quantities, exact ``Decimal``).
- ``naming``: ``gang_name(dag_id, task_id, run_id, map_index=, attempt=)``, ``GangNames`` (every
  object's name, the scheduling gate), ``label_value``, DNS predicates, ``LABEL_PREFIX``.
- ``manifests``: builders for the owner ConfigMap, PodTemplate, ProvisioningRequest, Kueue Job and
  pod group, gated and launch member pods (consume annotations, rank environment), headless Service.
- ``phases``: ``Phase``, ``Reason`` (stored format), ``is_retryable``.
- ``conditions``: ``is_*`` / ``has_*`` predicates; ``provisioning.classify_provisioning_request``,
  ``workload.classify_workload``, ``members.classify_gated_pods``, ``members.classify_running_gang``,
  each with its precedence in its module docstring.
- ``decision``: ``Observed`` (what a trigger saw), ``Stage``, ``Policy`` (deadlines),
  ``decide(observed, *, now, policy) -> Decision(phase, terminal, reason, message, ...)``.
- ``fallback``: typed ladder steps (``OtherCluster`` among them); ``ladder_choice``:
  ``choose_step(ladder, try_number, history)`` (transient failures repeat the step).
- ``cost``: GPU-seconds reserved, used and idle, per try and summed.
- ``records``: every format stored or passed between processes, typed, with tolerant readers
  (trigger events and arguments, ``TryPlan``/``TryState``/``TryRecord``, the task state keys).
- ``tries``: the logic of one try - ``plan.plan_try``/``adopt``, the operator's argument checks, the
  member template, a finished try's record and the task's summary.
"""
