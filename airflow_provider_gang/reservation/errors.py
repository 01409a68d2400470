"""The one error the pure core raises for a bad gang description.

Exception tree of ``reservation/`` (operators turn it into a non-retryable Airflow failure)::

    ValueError
     +-- GangSpecError        a field of the gang is invalid; permanent, fix the DAG
     +-- QuantityError        (reservation.quantity) text is not a Kubernetes quantity
     +-- TemplateError        (reservation.template) the member pod template is unusable; a GangSpecError
"""

from __future__ import annotations


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
