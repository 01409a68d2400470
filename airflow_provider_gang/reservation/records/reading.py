"""The tolerant reader every record's ``from_dict`` uses (the "tolerant reader" of Fowler's
``bliki/TolerantReader``: take what you know, ignore the rest, default what is optional).

A record read from storage may have been written by an older or a newer release of this provider:
a newer one may have added keys (ignored here), an older one may lack keys added since (their
dataclass defaults apply). What cannot be defaulted - a required key, or a ``version`` newer than
the reader knows - raises :class:`RecordError`, naming the record and the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

VERSION_KEY = "version"
CURRENT_VERSION = 1
"""The version every record writes; see the package docstring for when it changes."""


class RecordError(ValueError):
    """A stored value cannot be read as ``record``: ``key`` is missing, of the wrong type, or newer."""

    def __init__(self, record: str, key: str, problem: str) -> None:
        super().__init__(f"{record}: {key!r} {problem}")
        self.record = record
        self.key = key
        self.problem = problem


def record_values(
    record: type[Any], data: Any, convert: Mapping[str, Callable[[Any], Any]] | None = None
) -> dict[str, Any]:
    """Keyword arguments for the dataclass ``record`` from the stored mapping ``data``.

    Keys of ``data`` that are no field of ``record`` are ignored, ``version`` included; a field
    whose key is missing is left out, so its default applies; ``convert[name]`` turns a value
    that is not ``None`` into the field's type. Raises :class:`RecordError` when ``data`` is no
    mapping, its ``version`` is newer than :data:`CURRENT_VERSION`, a field without default is
    missing, or a conversion fails.
    """
    name = record.__name__
    if not isinstance(data, Mapping):
        raise RecordError(name, "", f"is a {type(data).__name__}, not a mapping")
    version = data.get(VERSION_KEY, CURRENT_VERSION)
    if not isinstance(version, int) or version > CURRENT_VERSION:
        raise RecordError(name, VERSION_KEY, f"is {version!r}; this provider reads up to {CURRENT_VERSION}: upgrade it")
    converters = convert or {}
    values: dict[str, Any] = {}
    for field_name, required in _fields_of(record):
        if field_name not in data:
            if required:
                raise RecordError(name, field_name, "is missing")
            continue
        value = data[field_name]
        converter = converters.get(field_name)
        if value is not None and converter is not None:
            try:
                value = converter(value)
            except (TypeError, ValueError, KeyError) as error:
                raise RecordError(name, field_name, f"cannot be read: {error}") from error
        values[field_name] = value
    return values


_FIELDS: dict[type[Any], tuple[tuple[str, bool], ...]] = {}


def _fields_of(record: type[Any]) -> tuple[tuple[str, bool], ...]:
    """Each field's name and whether it is required (no default), worked out once per record class:
    a page of 1,000 stored records reads each class's fields thousands of times."""
    fields = _FIELDS.get(record)
    if fields is None:
        fields = _FIELDS[record] = tuple(
            (field.name, field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING)
            for field in dataclasses.fields(record)
        )
    return fields


def optional_text(value: Any) -> str | None:
    """``None`` for ``None`` or ``""``, else ``value`` as a string (uids, selectors)."""
    return None if value is None or value == "" else str(value)
