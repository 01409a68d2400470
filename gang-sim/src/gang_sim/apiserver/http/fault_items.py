"""The items of a fault spec: what they target, their windows, and their spec and JSON forms.

The grammar and the meaning of every field are in :mod:`.faults` (the reference). Each item
validates itself on construction (``ValueError`` with the reason), so a spec string and a JSON
document are held to the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.http import malformed

#: The RBAC verbs the API middleware computes for resource requests (``paths.parse``).
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})
#: Injected error statuses; ``reset`` and ``drop`` act on the connection instead.
STATUS_CODES = (429, 500, 503, 504)
CONNECTION_FAULTS = ("reset", "drop")
#: Subresource names of upstream built-in kinds and CRDs (``status``, ``scale``): the second of two
#: resource segments is one of these (or ``*``), else it is the plural of a group.
SUBRESOURCES = frozenset(
    {
        "approval",
        "attach",
        "binding",
        "ephemeralcontainers",
        "eviction",
        "exec",
        "finalize",
        "log",
        "portforward",
        "proxy",
        "resize",
        "scale",
        "status",
        "token",
    }
)
Code = int | str


@dataclass(frozen=True)
class Target:
    """Which requests an item concerns.

    ``group``: None for any group; ``plural``: ``*`` for any; ``subresource``: ``""`` for the main
    resource only, ``*`` for the main resource and every subresource, else that subresource.
    """

    group: str | None = None
    plural: str = "*"
    subresource: str = "*"

    @classmethod
    def parse(cls, text: str) -> Target:
        """A resource field: ``*``, ``plural``, ``group/plural``, ``plural/sub``, ``group/plural/sub``."""
        segments = text.split("/")
        if any(not segment or segment != segment.strip() for segment in segments):
            raise ValueError(f"bad resource {text!r}")
        if segments == ["*"]:
            return ANY
        if len(segments) == 1:
            return cls(None, segments[0], "")
        if len(segments) == 2:
            first, second = segments
            if second in SUBRESOURCES or second == "*":
                return cls(None, first, second)
            return cls(first, second, "")
        if len(segments) == 3:
            return cls(segments[0], segments[1], segments[2])
        raise ValueError(f"bad resource {text!r}: at most <group>/<plural>/<subresource>")

    def matches(self, group: str, plural: str, subresource: str | None) -> bool:
        if self.group is not None and self.group != group:
            return False
        if self.plural not in ("*", plural):
            return False
        if self.subresource == "*":
            return True
        return self.subresource == (subresource or "")

    def __str__(self) -> str:
        if self == ANY:
            return "*"
        segments = [self.group] if self.group is not None else []
        segments.append(self.plural)
        if self.subresource:
            segments.append(self.subresource)
        return "/".join(segments)


ANY = Target()


@dataclass
class Window:
    """When an item may hit: at most ``count`` times, within ``seconds`` of the spec being set.

    ``used`` counts the hits so far (state, not configuration).
    """

    count: int | None = None
    seconds: float | None = None
    used: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.count is not None and (isinstance(self.count, bool) or self.count < 1):
            raise ValueError(f"count must be a positive integer, got {self.count!r}")
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds > 0):
            raise ValueError(f"for must be a positive number of seconds, got {self.seconds!r}")

    @classmethod
    def parse(cls, fields: Sequence[str]) -> Window:
        """The trailing ``count:<n>`` / ``for:<seconds>`` pairs of an item (each at most once)."""
        if len(fields) % 2:
            raise ValueError(f"window fields come in pairs (count:<n>, for:<seconds>), got {':'.join(fields)!r}")
        values: dict[str, str] = {}
        for name, value in zip(fields[::2], fields[1::2], strict=True):
            if name not in ("count", "for") or name in values:
                raise ValueError(f"unknown or repeated window field {name!r} (count:<n>, for:<seconds>)")
            values[name] = value
        return cls(
            count=None if "count" not in values else _integer(values["count"], "count"),
            seconds=None if "for" not in values else _number(values["for"], "for"),
        )

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Window:
        count, seconds = item.get("count"), item.get("for_seconds")
        return cls(
            count=None if count is None else _integer(str(count), "count"),
            seconds=None if seconds is None else _number(str(seconds), "for_seconds"),
        )

    def is_open(self, elapsed: float) -> bool:
        """Whether the item may still hit, ``elapsed`` seconds after the spec was set."""
        if self.count is not None and self.used >= self.count:
            return False
        return self.seconds is None or elapsed < self.seconds

    def to_spec(self) -> str:
        fields = ([f"count:{self.count}"] if self.count is not None else []) + (
            [f"for:{self.seconds!r}"] if self.seconds is not None else []
        )
        return "".join(f":{part}" for part in fields)

    def to_json(self) -> dict[str, Any]:
        return ({"count": self.count} if self.count is not None else {}) | (
            {"for_seconds": self.seconds} if self.seconds is not None else {}
        )


def _target_json(target: Target) -> dict[str, Any]:
    return {} if target == ANY else {"resource": str(target)}


def _target_spec(target: Target) -> str:
    return "" if target == ANY else f"/{target}"


@dataclass
class ErrorRate:
    """``<verb>[/<resource>]:<rate>:<code>[:<window>]``: hit ``rate`` of matching requests with ``code``."""

    verb: str
    rate: float
    code: Code
    target: Target = ANY
    window: Window = field(default_factory=Window)

    def __post_init__(self) -> None:
        if self.verb != "*" and self.verb not in VERBS:
            raise ValueError(f"unknown verb {self.verb!r} (one of {', '.join(sorted(VERBS))} or *)")
        check_rate(self.rate)
        if self.code not in STATUS_CODES and self.code not in CONNECTION_FAULTS:
            raise ValueError(f"code must be one of {', '.join(map(str, STATUS_CODES + CONNECTION_FAULTS))}")

    def to_spec(self) -> str:
        return f"{self.verb}{_target_spec(self.target)}:{self.rate!r}:{self.code}{self.window.to_spec()}"

    def to_json(self) -> dict[str, Any]:
        return (
            {"verb": self.verb, "rate": self.rate, "code": self.code}
            | _target_json(self.target)
            | (self.window.to_json())
        )


@dataclass
class MalformedAnswer:
    """``malformed[/<resource>]:<kind>[:<window>]``: answers of that resource malformed as ``kind``."""

    kind: str
    target: Target = ANY
    window: Window = field(default_factory=Window)

    def __post_init__(self) -> None:
        if self.kind not in malformed.KINDS:
            raise ValueError(f"unknown malformed kind {self.kind!r} (one of {', '.join(malformed.KINDS)})")

    def to_spec(self) -> str:
        return f"malformed{_target_spec(self.target)}:{self.kind}{self.window.to_spec()}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind} | _target_json(self.target) | self.window.to_json()


@dataclass
class WatchExpiry:
    """``watch-expire[/<resource>]:<rate>[:<window>]``: resumed watches answered 410 Expired."""

    rate: float
    target: Target = ANY
    window: Window = field(default_factory=Window)

    def __post_init__(self) -> None:
        check_rate(self.rate)

    def to_spec(self) -> str:
        return f"watch-expire{_target_spec(self.target)}:{self.rate!r}{self.window.to_spec()}"

    def to_json(self) -> dict[str, Any]:
        return {"rate": self.rate} | _target_json(self.target) | self.window.to_json()


@dataclass
class DiscoveryError:
    """``discovery[/<group>[/<version>]]:<rate>:<code>[:<window>]``: discovery GETs answered ``code``.

    ``group`` ``None`` concerns every discovery path (``/api``, ``/api/v1``, ``/apis`` and below);
    a group concerns ``/apis/<group>`` and its versions, a version only ``/apis/<group>/<version>``.
    """

    rate: float
    code: Code
    group: str | None = None
    version: str | None = None
    window: Window = field(default_factory=Window)

    def __post_init__(self) -> None:
        check_rate(self.rate)
        if self.code not in STATUS_CODES and self.code not in CONNECTION_FAULTS:
            raise ValueError(f"code must be one of {', '.join(map(str, STATUS_CODES + CONNECTION_FAULTS))}")
        if self.version is not None and self.group is None:
            raise ValueError("a discovery version needs its group: discovery/<group>/<version>")

    @classmethod
    def parse_path(cls, text: str) -> tuple[str | None, str | None]:
        """``(group, version)`` of the part after ``discovery/`` (``""``: every discovery path)."""
        if not text:
            return None, None
        segments = text.split("/")
        if len(segments) > 2 or any(not segment or segment != segment.strip() for segment in segments):
            raise ValueError(f"bad discovery path {text!r}: discovery[/<group>[/<version>]]")
        return segments[0], segments[1] if len(segments) == 2 else None

    def concerns(self, path: str) -> bool:
        """Whether the discovery request for ``path`` (no trailing slash) is one this item targets."""
        if self.group is None:
            return True
        segments = path.split("/")[2:] if path.startswith("/apis/") else []
        if not segments or segments[0] != self.group:
            return False
        return self.version is None or segments[1:2] == [self.version]

    def to_spec(self) -> str:
        path = "".join(f"/{segment}" for segment in (self.group, self.version) if segment is not None)
        return f"discovery{path}:{self.rate!r}:{self.code}{self.window.to_spec()}"

    def to_json(self) -> dict[str, Any]:
        path = {key: value for key, value in (("group", self.group), ("version", self.version)) if value is not None}
        return {"rate": self.rate, "code": self.code} | path | self.window.to_json()


def check_rate(rate: float) -> None:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be a number from 0 to 1, got {rate!r}")


def parse_rate(text: str) -> float:
    rate = _number(text, "rate")
    check_rate(rate)
    return rate


def parse_code(value: object) -> Code:
    """``429``/``500``/``503``/``504`` (a number or its digits) or ``reset``/``drop``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


def _integer(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None


def _number(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {text!r}")
    return value
