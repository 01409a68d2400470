"""The typed records of everything this provider stores or passes between processes.

One frozen dataclass per format, each with ``to_dict()`` (plain JSON values) and a tolerant
``from_dict()`` (:mod:`.reading`: unknown keys are ignored, a missing optional key takes its default,
a missing required key is a :class:`~.reading.RecordError`):

- :mod:`.tries`: ``TryPlan``, ``TryState`` (task state key ``gang.current``), ``TryRecord`` (one item
  of ``gang.tries``), ``ReservedObject``, and ``ReservationFacts`` (what creating a reservation found);
- :mod:`.events`: ``GangEvent``, the payload of the one ``TriggerEvent`` a gang trigger yields;
- :mod:`.triggers`: ``TriggerArguments``, the kwargs a gang trigger is serialized to, and its
  ``DeleteTarget`` items;
- :mod:`.task_state`: the task state store's keys, the final task instance states, and the readers
  of the stored values.

The operator, the triggers and the UI plugin read these formats only through this package.

Versions: every record writes ``"version": 1``. A version changes only together with a golden
fixture of the old version (``tests/unit/reservation/records/``) and a test that reads it; a reader
refuses a version newer than it knows with "upgrade the provider" rather than misreading it.
"""
