"""Malformed answers injected by ``malformed/<resource>:<kind>`` fault items (see :mod:`.faults`).

The stored objects are never changed: the functions below return altered copies of what a GET, a
LIST item or a WATCH event object would have carried. Each kind imitates something a client decoding
real clusters meets (old or buggy controllers, version skew, cut connections):

- ``no-status``: the object has no ``status`` (a controller that has not reconciled it yet);
- ``unknown-condition``: ``status.conditions`` gains a condition of a type no client knows
  (:data:`UNKNOWN_CONDITION_TYPE`), as newer controller versions add types; clients must ignore it;
- ``wrong-type``: ``status.conditions`` is a string instead of a list (``status`` itself when the
  object has none): a decoder that trusts the schema breaks;
- ``truncated-watch``: (watches only) the first event line is cut in the middle, then the stream ends
  cleanly, as a proxy closing a connection mid-write does.
"""

from __future__ import annotations

import copy
from typing import Any

NO_STATUS = "no-status"
UNKNOWN_CONDITION = "unknown-condition"
WRONG_TYPE = "wrong-type"
TRUNCATED_WATCH = "truncated-watch"
KINDS = (NO_STATUS, UNKNOWN_CONDITION, WRONG_TYPE, TRUNCATED_WATCH)
#: Kinds that alter objects (GET, LIST items, WATCH event objects); ``truncated-watch`` cuts lines.
OBJECT_KINDS = frozenset({NO_STATUS, UNKNOWN_CONDITION, WRONG_TYPE})
UNKNOWN_CONDITION_TYPE = "GangSimUnknownCondition"
WRONG_TYPE_VALUE = "injected: not a list"


def apply(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` altered as ``kind`` says (one of :data:`OBJECT_KINDS`); ``obj`` is not touched."""
    altered = copy.deepcopy(obj)
    status = altered.get("status")
    if kind == NO_STATUS:
        altered.pop("status", None)
    elif kind == UNKNOWN_CONDITION:
        if not isinstance(status, dict):
            status = altered["status"] = {}
        conditions = status.get("conditions")
        status["conditions"] = [*(conditions if isinstance(conditions, list) else []), _unknown_condition(altered)]
    elif kind == WRONG_TYPE:
        if isinstance(status, dict):
            status["conditions"] = WRONG_TYPE_VALUE
        else:
            altered["status"] = WRONG_TYPE_VALUE
    else:
        raise ValueError(f"not an object-altering malformed kind: {kind!r}")
    return altered


def truncate(line: bytes) -> bytes:
    """The first half of a watch line: never valid JSON, never newline-terminated."""
    return line.rstrip(b"\n")[: max(1, len(line) // 2)]


def _unknown_condition(obj: dict[str, Any]) -> dict[str, Any]:
    timestamp = (obj.get("metadata") or {}).get("creationTimestamp") or "1970-01-01T00:00:00Z"
    return {
        "type": UNKNOWN_CONDITION_TYPE,
        "status": "True",
        "reason": "InjectedFault",
        "message": "a condition type this client does not know (injected by gang-sim)",
        "lastTransitionTime": timestamp,
    }
