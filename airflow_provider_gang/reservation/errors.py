"""The errors the pure core raises: a bad gang description, an unreadable answer, a gang it cannot place.

Exception tree of ``reservation/`` (operators turn each into an Airflow failure, ``operators.lifecycle``)::

    Exception
     +-- ValueError
     |    +-- GangSpecError       a field of the gang is invalid; permanent, fix the DAG
     |    +-- QuantityError       (reservation.quantity) text is not a Kubernetes quantity
     |    +-- TemplateError       (reservation.template) the member pod template is unusable; a GangSpecError
     |    +-- MalformedObject     an object the API server sent has a field of the wrong type: the try
     |                            ends ``malformed_answer`` (retryable: a new try reads anew)
     +-- PlacementRefused         a topology gang cannot be placed (``reason``: a ``phases.Reason``)
"""

from __future__ import annotations

from airflow_provider_gang.reservation.phases import Reason


class GangSpecError(ValueError):
    """A field of the gang description is invalid. Never retryable.

    ``field`` names the argument as the user wrote it (``"size"``, ``"provisioning_parameters"``,
    ``"pod_template.spec.containers[0].image"``); ``message`` says what is wrong and how to fix it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type[GangSpecError], tuple[str, str]]:
        return (type(self), (self.field, self.message))


class MalformedObject(ValueError):
    """An object read from the API server cannot be read: a field of the wrong JSON type, a label value
    that is no string, a quantity that does not parse. The message names the object and the field."""


class PlacementRefused(Exception):
    """A topology gang cannot be placed on this try (``reservation.topology.choice``): ``reason`` says
    why as a ``phases.Reason`` (the ladder reads it), ``message`` for people."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __reduce__(self) -> tuple[type[PlacementRefused], tuple[Reason, str]]:
        return (type(self), (self.reason, self.message))
