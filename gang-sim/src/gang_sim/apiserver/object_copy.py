"""Deep copies of API objects for the store (every object handed out or stored is a fresh copy).

``metadata.managedFields`` is the deepest part of most objects (a ``fieldsV1`` tree per manager)
and holds only strings, lists and objects, so it is copied through the C JSON codec; everything else
with :func:`json_copy`, several times faster than :func:`copy.deepcopy` and handing any value JSON
would not keep (tuples, YAML timestamps from in-process callers) to :func:`copy.deepcopy`.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def copy_field(name: str, value: Any) -> Any:
    """A deep copy of the value of the field ``name`` (of an object or its metadata)."""
    if name == "managedFields":
        try:
            return json.loads(json.dumps(value))
        except (TypeError, ValueError):
            pass
    elif name == "metadata" and isinstance(value, dict):
        return {key: copy_field(key, child) for key, child in value.items()}
    return json_copy(value)


def copy_metadata(metadata: Any) -> Any:
    """A deep copy of an object's ``metadata``."""
    return copy_field("metadata", metadata)


def copy_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of an API object, keys in their order."""
    return {key: copy_field(key, value) for key, value in obj.items()}


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists, scalars), as ``copy.deepcopy`` makes but several
    times faster; any other container is handed to ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: item if item is None or type(item) in _SCALARS else json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [item if item is None or type(item) in _SCALARS else json_copy(item) for item in value]
    if value is None or type(value) in _SCALARS:
        return value
    return copy.deepcopy(value)


_SCALARS = frozenset({str, int, float, bool})
