"""Resource quantities and the resource requests of pods.

Quantities follow ``k8s.io/apimachinery/pkg/api/resource``: a decimal number with an optional
suffix, binary (``Ki Mi Gi Ti Pi Ei``), decimal (``k M G T P E``), milli (``m``) or an exponent
(``1e3``). They are parsed to :class:`fractions.Fraction` so that ``500m + 500m == 1`` exactly.

A pod's effective request per resource is what kube-scheduler uses (``pkg/api/v1/resource``,
``PodRequests``): the sum over ``containers`` compared with the largest single ``initContainers``
request, taking the larger; a container without ``requests`` but with ``limits`` requests its limits
(API defaulting). The scheduler also counts one ``pods`` slot per pod.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

GPU = "nvidia.com/gpu"
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_MULTIPLIERS: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

Resources = dict[str, Fraction]


class QuantityError(ValueError):
    """A string is not a Kubernetes resource quantity."""


def parse_quantity(value: object) -> Fraction:
    """Parse ``"4"``, ``"500m"``, ``"16Gi"``, ``"1e3"`` or a number; raise :class:`QuantityError`."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """:func:`parse_quantity` of a string, remembered: a pass of the scheduler parses the same few
    quantities (node allocatable, member requests) once per pod and node, and a Fraction is immutable."""
    match = _QUANTITY.match(value.strip())
    if match is None or match.group(1) in {"", ".", "+", "-"}:
        raise QuantityError(
            "quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}"
        )
    try:
        number = Fraction(match.group(1))
    except ValueError as error:
        raise QuantityError(f"{value!r} is not a quantity") from error
    suffix = match.group(2) or ""
    if suffix[:1] in {"e", "E"} and suffix not in _MULTIPLIERS:
        return number * Fraction(10) ** int(suffix[1:])
    return number * _MULTIPLIERS[suffix]


def parse_resources(values: Mapping[str, Any] | None) -> Resources:
    """Parse a ``requests``/``capacity`` mapping; raise :class:`QuantityError` naming the resource."""
    parsed: Resources = {}
    for name, value in (values or {}).items():
        try:
            parsed[name] = parse_quantity(value)
        except QuantityError as error:
            raise QuantityError(f"{name}: {error}") from error
    return parsed


def add(total: Resources, more: Mapping[str, Fraction], times: int = 1) -> Resources:
    """``total + times * more`` as a new mapping."""
    result = dict(total)
    for name, amount in more.items():
        result[name] = result.get(name, Fraction(0)) + amount * times
    return result


def subtract(total: Mapping[str, Fraction], less: Mapping[str, Fraction]) -> Resources:
    result = dict(total)
    for name, amount in less.items():
        result[name] = result.get(name, Fraction(0)) - amount
    return result


def container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    requests = parse_resources(resources.get("limits"))
    requests.update(parse_resources(resources.get("requests")))
    return requests


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """The scheduler's view of what one pod with ``pod_spec`` needs, including one ``pods`` slot."""
    total: Resources = {}
    for container in pod_spec.get("containers") or []:
        total = add(total, container_requests(container))
    for init in pod_spec.get("initContainers") or []:
        for name, amount in container_requests(init).items():
            total[name] = max(total.get(name, Fraction(0)), amount)
    total["pods"] = total.get("pods", Fraction(0)) + 1
    return total


def sum_requests(specs: Iterable[Mapping[str, Any]]) -> Resources:
    total: Resources = {}
    for spec in specs:
        total = add(total, pod_requests(spec))
    return total


def format_quantity(value: Fraction) -> str:
    """Render a quantity the way the API server does for whole numbers and milli-units."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(value))
