"""The pure logic of a try: what it does, whether its arguments hold, and what it recorded.

- ``plan``: adopt the gang of a try whose worker stopped, or pick the fallback step and build the
  spec (``plan_try``, ``adopt``); which finished tries form the current sequence.
- ``arguments``: the ``GangTrainingOperator`` arguments that have no ``GangSpec`` counterpart.
- ``member_template``: the member pod template the operator's arguments describe.
- ``results``: a finished try's ``TryRecord``, the task's XCom summary, the story in the task log.

The records themselves (``TryPlan``, ``TryState``, ``TryRecord``) are ``reservation.records``.
"""
