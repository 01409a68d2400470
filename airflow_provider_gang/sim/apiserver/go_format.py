"""How the Go apiserver prints values inside error messages, so the emulator's messages read the same.

- :func:`quote` is Go's ``strconv.Quote`` (``%q``): ``"`` and ``\\`` escaped, ``\\a \\b \\f \\n \\r \\t \\v``
  by name, other control characters as ``\\xNN``, other non-printable characters as ``\\uNNNN`` /
  ``\\UNNNNNNNN``; printable Unicode stays as it is.
- :func:`number` is ``%v`` of an ``int64`` or ``float64``: floats in their shortest form, with an
  exponent (``1e+06``, ``1e-05``) below 1e-4 or from 1e+06 on (``strconv.FormatFloat(f, 'g', -1, 64)``).
- :func:`json_type` names a decoded JSON value's type as ``encoding/json``'s "cannot unmarshal <type>
  into Go value of type ..." errors do (``bool``, ``number``, ``string``, ``array``, ``object``).
- :func:`bad_value` is the value part of a field error, ``field.Error.ErrorBody`` in
  ``k8s.io/apimachinery/pkg/util/validation/field/errors.go``: numbers and booleans bare, strings
  quoted, anything else (objects, lists, ``null``) as compact JSON with sorted keys (Go's
  ``json.Marshal``, HTML-safe); :data:`OMITTED` leaves the value out (``field.OmitValueType``), as CEL rules on
  objects and arrays do (``apiextensions-apiserver`` ``pkg/apiserver/schema/cel/validation.go``).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Final

# json.Marshal escapes these even inside strings (its default HTML-safe encoding).
_JSON_HTML_ESCAPES: Final = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_NAMED_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


class _Omitted:
    """The marker of a field error that prints no value (Go's ``field.OmitValueType{}``)."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()


def quote(text: str) -> str:
    """``text`` as Go's ``strconv.Quote`` writes it."""
    parts = ['"']
    for character in text:
        if character in ('"', "\\"):
            parts.append("\\" + character)
        elif character in _NAMED_ESCAPES:
            parts.append(_NAMED_ESCAPES[character])
        elif character.isprintable():
            parts.append(character)
        elif ord(character) < 0x20 or ord(character) == 0x7F:
            parts.append(f"\\x{ord(character):02x}")
        elif ord(character) < 0x10000:
            parts.append(f"\\u{ord(character):04x}")
        else:
            parts.append(f"\\U{ord(character):08x}")
    parts.append('"')
    return "".join(parts)


def number(value: int | float) -> str:
    """``value`` as Go's ``%v`` prints an ``int64`` or a ``float64``."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    # repr is the shortest text that reads back as the same float, as Go's shortest formatting.
    shortest = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(str(digit) for digit in shortest.digits)
    exponent = int(shortest.exponent) + len(digits) - 1  # of the first digit
    sign = "-" if value < 0 else ""
    if exponent < -4 or exponent >= 6:
        fraction = "." + digits[1:] if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def bad_value(value: Any) -> str:
    """The rendering of ``value`` after ``Invalid value: `` in a field error (empty for :data:`OMITTED`)."""
    if value is OMITTED:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return number(value)
    if isinstance(value, str):
        return quote(value)
    encoded = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    for character, escape in _JSON_HTML_ESCAPES.items():
        encoded = encoded.replace(character, escape)
    return encoded


def json_type(value: Any) -> str:
    """The JSON type of ``value`` as Go's ``encoding/json`` names it in its unmarshalling errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
