"""Kubernetes resource quantities, parsed purely.

Follows ``k8s.io/apimachinery/pkg/api/resource/quantity.go``: a signed decimal number followed by
an optional suffix that is either binary (``Ki Mi Gi Ti Pi Ei``), decimal SI
(``n u m "" k M G T P E``) or a decimal exponent (``e3``, ``E-2``). ``"1.5Gi"``, ``"500m"``,
``"2"`` and ``"1e3"`` are valid; ``"1.5GB"``, ``"Gi"``, ``""`` and ``"1 Gi"`` are not.
"""

from __future__ import annotations

import re
from decimal import Decimal

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[A-Za-z]*)(?P<exponent>[+-]?[0-9]*)$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(text: str | int) -> Decimal:
    """Return the value of a Kubernetes quantity as an exact ``Decimal``.

    Integers are accepted as they are (YAML often yields ``cpu: 4``). Raises :class:`QuantityError`
    naming the offending text otherwise.
    """
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return Decimal(text)
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (examples: '4', '500m', '16Gi', '1e3')")
    number = Decimal(match["number"])
    suffix, exponent = match["suffix"], match["exponent"]
    if suffix in ("e", "E") and exponent not in ("", "+", "-"):
        return number * (Decimal(10) ** int(exponent))
    if exponent:
        raise QuantityError(f"{text!r} has an unknown suffix {suffix + exponent!r}")
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    raise QuantityError(f"{text!r} has an unknown suffix {suffix!r} (binary: Ki..Ei, decimal: m, k, M, G, ...)")


def is_quantity(text: str | int) -> bool:
    """Whether ``text`` parses as a Kubernetes quantity."""
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True
