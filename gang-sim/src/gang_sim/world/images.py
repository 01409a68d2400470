"""Which container images the kubelet runs as local processes: fnmatch-style glob patterns.

A scenario's ``localProcessImages`` and ``gang-sim serve --local-images GLOB,...`` hold patterns in
the syntax of Python's :mod:`fnmatch` (https://docs.python.org/3/library/fnmatch.html): ``*`` any run
of characters, ``?`` one character, ``[seq]`` one of a set. Matching is case-sensitive
(:func:`fnmatch.fnmatchcase`), as image references are. ``python:*`` matches ``python:3.11-slim``
and ``python:3.12``, not ``docker.io/library/python:3.11`` (add ``*/python:*`` for that).

A pattern is refused (:class:`ImagePatternError`) when it is empty, holds whitespace or a ``,`` (the
flag's separator), or has an unclosed ``[`` (fnmatch would silently read it as a literal ``[``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

PUBLIC_PYTHON_IMAGES = "python:*"
"""The pattern every shipped scenario lists: public Python images run on the local interpreter."""


class ImagePatternError(ValueError):
    """An image pattern is malformed; the message says which and why."""


def check_pattern(pattern: object) -> str:
    """Return ``pattern`` if it is a valid image glob (module docstring), else raise ImagePatternError."""
    if not isinstance(pattern, str) or not pattern:
        raise ImagePatternError(f"an image pattern must be a non-empty string, got {pattern!r}")
    if any(character.isspace() or character == "," for character in pattern):
        raise ImagePatternError(f"image pattern {pattern!r} must not contain whitespace or ','")
    opened = pattern.rfind("[")
    if opened != -1 and "]" not in pattern[opened + 2 :]:
        raise ImagePatternError(f"image pattern {pattern!r} has an unclosed '[' (fnmatch character set)")
    return pattern


def parse_patterns(text: str) -> tuple[str, ...]:
    """Split the comma-separated value of ``--local-images`` and check each pattern."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise ImagePatternError(f"expected comma-separated image globs such as 'python:*,ghcr.io/me/*', got {text!r}")
    return tuple(check_pattern(item) for item in items)


def matches(image: str, patterns: Iterable[str]) -> bool:
    """Whether ``image`` matches one of ``patterns`` (case-sensitive fnmatch)."""
    return any(fnmatch.fnmatchcase(image, pattern) for pattern in patterns)
