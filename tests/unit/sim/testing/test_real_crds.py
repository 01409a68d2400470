"""When the real harness counts a CustomResourceDefinition as Established
(``gang_sim.testing.real.kubectl.is_established``): a definition just created has
``status.conditions: null``, which ``kubectl wait`` fails on and the harness waits through."""

from __future__ import annotations

from typing import Any

import pytest

from gang_sim.testing.real.kubectl import is_established

ESTABLISHED = {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ({}, False),
        ({"status": None}, False),
        ({"status": {"conditions": None, "storedVersions": ["v1"]}}, False),
        ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}]}}, False),
        ({"status": {"conditions": [{**ESTABLISHED, "status": "False", "reason": "Installing"}]}}, False),
        ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"}, ESTABLISHED]}}, True),
    ],
    ids=["not listed yet", "no status", "conditions null", "names accepted only", "installing", "established"],
)
def test_a_definition_is_established_only_once_its_condition_says_so(
    definition: dict[str, Any], expected: bool
) -> None:
    assert is_established(definition) is expected
