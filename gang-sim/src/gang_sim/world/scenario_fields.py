"""Typed, path-naming access to a decoded scenario document (used by :mod:`.scenario`).

:class:`Fields` wraps one mapping of the document, remembers which keys were read, and raises
:class:`ScenarioError` naming the dotted field path (``nodePools[1].gpusPerNode``) of a value of the
wrong type; :meth:`Fields.reject_unknown` refuses keys nobody read (typos).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gang_sim.world.resources import QuantityError, parse_quantity


class ScenarioError(ValueError):
    """A scenario file is invalid; ``field`` is the dotted path of the offending field."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


def string_value(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ScenarioError(path, f"must be a non-empty string, got {value!r}")
    return value


class Fields:
    """Typed access to one mapping of the document; remembers which keys were read."""

    def __init__(self, value: object, path: str) -> None:
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise ScenarioError(path or "<root>", f"must be a mapping, got {type(value).__name__}")
        self._value: Mapping[str, Any] = value
        self._path = path
        self._read: set[str] = set()

    def _at(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def _get(self, key: str, required: bool) -> Any:
        self._read.add(key)
        if key not in self._value or self._value[key] is None:
            if required:
                raise ScenarioError(self._at(key), "is required")
            return None
        return self._value[key]

    def reject_unknown(self) -> None:
        unknown = sorted(str(key) for key in self._value if key not in self._read)
        if unknown:
            raise ScenarioError(self._at(unknown[0]), "unknown field")

    def has(self, key: str) -> bool:
        """Whether ``key`` is given (present and not ``null``)."""
        return self._value.get(key) is not None

    def child(self, key: str) -> Fields:
        return Fields(self._get(key, False), self._at(key))

    def string(self, key: str, *, required: bool = False, default: str = "") -> str:
        value = self._get(key, required)
        return default if value is None else string_value(value, self._at(key))

    def optionalstring_value(self, key: str) -> str | None:
        value = self._get(key, False)
        return None if value is None else string_value(value, self._at(key))

    def integer(self, key: str, *, required: bool = False, default: int = 0) -> int:
        value = self.optional_integer(key, required=required)
        return default if value is None else value

    def optional_integer(self, key: str, *, required: bool = False) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(self._at(key), f"must be an integer, got {value!r}")
        return value

    def seconds(self, key: str, *, required: bool = False, default: float = 0.0, positive: bool = False) -> float:
        value = self._get(key, required)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ScenarioError(self._at(key), f"must be a non-negative number, got {value!r}")
        if positive and value == 0:
            raise ScenarioError(self._at(key), "must be greater than 0")
        return float(value)

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ScenarioError(self._at(key), f"must be true or false, got {value!r}")
        return value

    def quantity(self, key: str, *, default: str) -> str:
        value = self._get(key, False)
        if value is None:
            return default
        text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        if not isinstance(text, str):
            raise ScenarioError(self._at(key), f"must be a quantity such as '8' or '32Gi', got {value!r}")
        try:
            parse_quantity(text)
        except QuantityError as error:
            raise ScenarioError(self._at(key), str(error)) from error
        return text

    def list(self, key: str, *, required: bool = False) -> list[object]:
        value = self._get(key, required)
        if value is None:
            return []
        if not isinstance(value, list):
            raise ScenarioError(self._at(key), f"must be a list, got {type(value).__name__}")
        return value

    def mapping(self, key: str) -> Mapping[str, object]:
        value = self._get(key, False)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ScenarioError(self._at(key), f"must be a mapping, got {type(value).__name__}")
        return value

    def string_map(self, key: str) -> dict[str, str]:
        result: dict[str, str] = {}
        for name, value in self.mapping(key).items():
            result[str(name)] = string_value(value, f"{self._at(key)}.{name}") if value != "" else ""
        return result
