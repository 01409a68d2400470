"""Injected faults for reliability tests: seeded errors and connection resets per verb and resource,
malformed answers, expired watches, latency, cut watch streams - each optionally for a window only.

A spec (``gang-sim serve --faults SPEC``, ``PUT /_sim/faults {"spec": SPEC}``) is a comma-separated
list of items::

    <verb>[/<resource>]:<rate>:<code>[:<window>]   error   create/pods:1.0:503:count:3
    malformed[/<resource>]:<kind>[:<window>]        answer  malformed/provisioningrequests:no-status
    watch-expire[/<resource>]:<rate>[:<window>]     410     watch-expire:1.0:count:1
    discovery[/<group>[/<version>]]:<rate>:<code>[:<window>]   discovery:1.0:503:count:2
    latency:<seconds>   watch-cut:<seconds>   retry-after:<seconds>   seed:<int>

- ``verb``: ``get list watch create update patch delete deletecollection`` (the RBAC verb of the
  request) or ``*``. Without ``/<resource>`` an item concerns every resource (``create:0.1:503``).
- ``resource``: ``*`` (anything, subresources included), ``<plural>`` (that plural in any group,
  main resource only, as in RBAC), ``<group>/<plural>``, ``<plural>/<subresource>``,
  ``<group>/<plural>/<subresource>``; ``<subresource>`` may be ``*`` (the main resource and every
  subresource). Of two segments the second is a subresource if it is a Kubernetes subresource name
  (:data:`.fault_items.SUBRESOURCES`) or ``*``, else the plural of a group: ``pods/log``,
  ``batch/jobs``, ``provisioningrequests/status``, ``autoscaling.x-k8s.io/provisioningrequests``.
  ``/_sim/requests`` writes resources in this form.
- ``rate``: probability 0..1 that a matching request is hit (drawn from the seeded random source).
- ``code``: ``429`` (TooManyRequests), ``500`` (InternalError), ``503`` (ServiceUnavailable),
  ``504`` (Timeout): a ``Status`` answer (429 and 504 with ``Retry-After``) and the request does
  nothing. ``reset``: the request takes effect, then its answer is cut - status line, headers and
  half the body are sent and the TCP connection is aborted (a watch sends the events pending when
  it starts, then is aborted: no last chunk). ``drop``: the connection is aborted before the
  request is handled (no answer, no effect). Clients see ``reset``/``drop`` as transport errors.
- ``malformed``: ``kind`` is one of ``no-status``, ``unknown-condition``, ``wrong-type``,
  ``truncated-watch`` (meanings in :mod:`.malformed`). It alters successful GET and LIST answers
  and WATCH event objects (``truncated-watch``: watches only), never the stored objects; a hit
  watch is malformed as a whole (one count). Table answers (kubectl) are never malformed.
- ``watch-expire``: a watch that carries a ``resourceVersion`` (not ``""``/``"0"``) is answered as
  by a server whose watch cache has compacted past it: HTTP 200, one ``ERROR`` event with a ``410
  Expired`` Status, end of stream - clients must relist
  (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes).
- ``discovery``: GETs of the discovery documents (``/api``, ``/api/v1``, ``/apis``,
  ``/apis/<group>``, ``/apis/<group>/<version>``) answered ``code`` (as for errors, ``reset`` and
  ``drop`` included); ``discovery/<group>`` limits it to that group's documents,
  ``discovery/<group>/<version>`` to one version's ``APIResourceList``.
- ``window``: ``count:<n>`` (the item hits at most ``n`` requests) and/or ``for:<seconds>`` (the item
  hits only within that many seconds of when the spec was set - a PUT to ``/_sim/faults``, or the
  start of ``gang-sim serve`` - on the monotonic ``clock``); with both, whichever ends first.
  Without a window an item stays active until the faults are replaced.
- ``latency`` delays every request; ``watch-cut`` ends every watch after that many seconds (clients
  resume); ``retry-after`` is the ``Retry-After`` of injected 429s and 504s (default 1); ``seed``
  seeds the random source: the same seed and the same sequence of requests give the same hits.

At most one fault shapes a request: error items first (tried in order, the first hit decides), then
for a watch ``watch-expire``, then ``malformed``. Faults other than ``discovery`` apply to resource
requests only; none applies to OpenAPI or ``/_sim/`` endpoints. A malformed spec raises ``ValueError`` naming the item.

``/_sim/faults``: GET answers :meth:`Faults.to_json`; PUT takes ``{"spec": SPEC}`` or such a JSON
document (the ``spec`` key wins; documents with ``errors`` only, as older versions wrote, are
accepted); DELETE clears. Replacing the faults starts new windows: ``Faults.from_json(f.to_json())``
and ``Faults.parse(f.to_spec())`` rebuild the same configuration with fresh windows::

    {"errors": [{"verb": "create", "rate": 1.0, "code": 503, "resource": "pods", "count": 3}],
     "malformed": [{"kind": "no-status", "resource": "provisioningrequests", "for_seconds": 10.0}],
     "watch_expire": [{"rate": 1.0}],
     "discovery": [{"rate": 1.0, "code": 503, "group": "scheduling.k8s.io", "count": 2}],
     "latency_seconds": 0.0, "watch_cut_seconds": null, "retry_after_seconds": 1, "seed": 7,
     "spec": "create/pods:1.0:503:count:3,malformed/provisioningrequests:no-status:for:10.0,..."}

Item keys holding defaults (``resource`` ``*``, no ``count``/``for_seconds``) are left out.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver import errors
from gang_sim.apiserver.http.fault_items import (
    ANY,
    DiscoveryError,
    ErrorRate,
    MalformedAnswer,
    Target,
    WatchExpiry,
    Window,
    parse_code,
    parse_rate,
)
from gang_sim.apiserver.http.malformed import TRUNCATED_WATCH
from gang_sim.apiserver.http.paths import RequestInfo

__all__ = ["DiscoveryError", "ErrorRate", "Faults", "Injection", "MalformedAnswer", "Target", "WatchExpiry", "Window"]

Clock = Callable[[], float]
_REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
_MESSAGES = {
    429: "the server has received too many requests and has asked us to try again later",
    500: "Internal error occurred: injected fault",
    503: "the server is currently unable to handle the request (injected fault)",
    504: "Timeout: request did not complete within the allotted timeout (injected fault)",
}
_SETTINGS = ("latency", "watch-cut", "retry-after", "seed")
_EXPECTED = (
    "expected <verb>[/<resource>]:<rate>:<code>, malformed[/<resource>]:<kind>, watch-expire[/<resource>]:<rate>"
    ", discovery[/<group>[/<version>]]:<rate>:<code> (each with optional :count:<n> / :for:<seconds>),"
    " latency:<s>, watch-cut:<s>, retry-after:<s> or seed:<n>"
)


@dataclass(frozen=True)
class Injection:
    """What an error item does to one request: ``kind`` ``error`` (answer ``error``), ``reset`` or ``drop``."""

    kind: str
    error: errors.ApiError | None = None


@dataclass
class Faults:
    """The current fault settings, their windows and the seeded random source that draws them.

    ``clock`` (monotonic seconds) times the ``for:`` windows from construction; inject a fake in tests.
    """

    error_rates: list[ErrorRate] = field(default_factory=list)
    latency_seconds: float = 0.0
    watch_cut_seconds: float | None = None
    retry_after_seconds: int = 1
    seed: int | None = None
    malformed: list[MalformedAnswer] = field(default_factory=list)
    watch_expiries: list[WatchExpiry] = field(default_factory=list)
    discovery_errors: list[DiscoveryError] = field(default_factory=list)
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)
    started_at: float = field(init=False, repr=False, compare=False)
    _random: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.started_at = self.clock()
        self._random = random.Random(self.seed)

    # -- building ---------------------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: str | None, *, clock: Clock = time.monotonic) -> Faults:
        """Parse a spec string (see module docstring); ValueError naming the first bad item."""
        settings: dict[str, str] = {}
        faults: dict[str, list[Any]] = {"errors": [], "malformed": [], "watch_expire": [], "discovery": []}
        for item in filter(None, (part.strip() for part in (spec or "").split(","))):
            parts = item.split(":")
            head, slash, resource = parts[0].partition("/")
            try:
                target = Target.parse(resource) if slash and head != "discovery" else ANY
                if head in _SETTINGS and not slash and len(parts) == 2:
                    settings[head] = parts[1]
                    _setting_values(settings)
                elif head == "malformed" and len(parts) >= 2:
                    faults["malformed"].append(MalformedAnswer(parts[1], target, Window.parse(parts[2:])))
                elif head == "watch-expire" and len(parts) >= 2:
                    faults["watch_expire"].append(WatchExpiry(parse_rate(parts[1]), target, Window.parse(parts[2:])))
                elif head == "discovery" and len(parts) >= 3:
                    group, version = DiscoveryError.parse_path(resource)
                    rate, code = parse_rate(parts[1]), parse_code(parts[2])
                    faults["discovery"].append(DiscoveryError(rate, code, group, version, Window.parse(parts[3:])))
                elif head not in _SETTINGS and len(parts) >= 3:
                    rate, code = parse_rate(parts[1]), parse_code(parts[2])
                    faults["errors"].append(ErrorRate(head, rate, code, target, Window.parse(parts[3:])))
                else:
                    raise ValueError(_EXPECTED)
            except ValueError as error:
                raise ValueError(f"bad fault item {item!r}: {error}") from None
        return cls._build(faults, settings, clock)

    @classmethod
    def from_json(cls, body: Mapping[str, Any], *, clock: Clock = time.monotonic) -> Faults:
        """The faults of a :meth:`to_json` document (older documents, with ``errors`` only, too).

        ``spec`` is ignored here (``PUT /_sim/faults`` reads a body with ``spec`` as a spec string).
        """
        faults: dict[str, list[Any]] = {"errors": [], "malformed": [], "watch_expire": [], "discovery": []}
        for section, built in faults.items():
            items = body.get(section) or []
            if not isinstance(items, list):
                raise ValueError(f"{section} must be a list")
            for index, item in enumerate(items):
                try:
                    built.append(_item_from_json(section, item))
                except (ValueError, KeyError, TypeError, AttributeError) as error:
                    raise ValueError(f"bad fault {section}[{index}] {item!r}: {error}") from None
        names = {
            "latency": "latency_seconds",
            "watch-cut": "watch_cut_seconds",
            "retry-after": "retry_after_seconds",
            "seed": "seed",
        }
        settings = {key: str(body[name]) for key, name in names.items() if body.get(name) is not None}
        return cls._build(faults, settings, clock)

    @classmethod
    def _build(cls, faults: dict[str, list[Any]], settings: Mapping[str, str], clock: Clock) -> Faults:
        latency, watch_cut, retry_after, seed = _setting_values(settings)
        return cls(
            error_rates=faults["errors"],
            latency_seconds=latency,
            watch_cut_seconds=watch_cut,
            retry_after_seconds=retry_after,
            seed=seed,
            malformed=faults["malformed"],
            watch_expiries=faults["watch_expire"],
            discovery_errors=faults["discovery"],
            clock=clock,
        )

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON; item keys with default values (``resource: "*"``, no window) are left out."""
        return {
            "errors": [item.to_json() for item in self.error_rates],
            "malformed": [item.to_json() for item in self.malformed],
            "watch_expire": [item.to_json() for item in self.watch_expiries],
            "discovery": [item.to_json() for item in self.discovery_errors],
            "latency_seconds": self.latency_seconds,
            "watch_cut_seconds": self.watch_cut_seconds,
            "retry_after_seconds": self.retry_after_seconds,
            "seed": self.seed,
            "spec": self.to_spec(),
        }

    def to_spec(self) -> str:
        """The spec string that :meth:`parse` turns into the same settings."""
        items = [item.to_spec() for item in self.error_rates]
        items += [item.to_spec() for item in self.malformed] + [item.to_spec() for item in self.watch_expiries]
        items += [item.to_spec() for item in self.discovery_errors]
        if self.latency_seconds:
            items.append(f"latency:{self.latency_seconds!r}")
        if self.watch_cut_seconds is not None:
            items.append(f"watch-cut:{self.watch_cut_seconds!r}")
        if self.retry_after_seconds != 1:
            items.append(f"retry-after:{self.retry_after_seconds}")
        if self.seed is not None:
            items.append(f"seed:{self.seed}")
        return ",".join(items)

    # -- drawing (one call per request; each consumes a window slot only when it hits) -------------

    def elapsed(self) -> float:
        """Seconds since these faults were set (on their clock)."""
        return self.clock() - self.started_at

    def draw_error(self, verb: str, info: RequestInfo | None = None) -> Injection | None:
        """The injected error, reset or drop for one request, if an item hits it.

        Without ``info`` only items for any resource (``*``) can hit.
        """
        elapsed = self.elapsed()
        return self._first_hit(
            item
            for item in self.error_rates
            if item.verb in ("*", verb) and _concerns(item.target, info) and item.window.is_open(elapsed)
        )

    def draw_discovery_error(self, path: str) -> Injection | None:
        """The injected error, reset or drop for one discovery GET of ``path``, if an item hits it."""
        elapsed = self.elapsed()
        path = path.rstrip("/")
        return self._first_hit(
            item for item in self.discovery_errors if item.concerns(path) and item.window.is_open(elapsed)
        )

    def _first_hit(self, candidates: Iterable[ErrorRate | DiscoveryError]) -> Injection | None:
        """The injection of the first candidate whose draw hits (one draw per candidate, in order)."""
        for item in candidates:
            if self._random.random() < item.rate:
                item.window.used += 1
                if isinstance(item.code, str):
                    return Injection(item.code)
                return Injection("error", self._error(item.code))
        return None

    def draw_malformed(self, info: RequestInfo) -> str | None:
        """The malformed-answer kind for one GET, LIST or WATCH, if an item applies (no randomness)."""
        if info.verb not in ("get", "list", "watch"):
            return None
        elapsed = self.elapsed()
        for item in self.malformed:
            if item.kind == TRUNCATED_WATCH and info.verb != "watch":
                continue
            if _concerns(item.target, info) and item.window.is_open(elapsed):
                item.window.used += 1
                return item.kind
        return None

    def draw_watch_expiry(self, info: RequestInfo, resource_version: str | None) -> bool:
        """Whether a watch resuming from ``resource_version`` is answered 410 Expired."""
        if info.verb != "watch" or resource_version in (None, "", "0"):
            return False
        elapsed = self.elapsed()
        for item in self.watch_expiries:
            if _concerns(item.target, info) and item.window.is_open(elapsed) and self._random.random() < item.rate:
                item.window.used += 1
                return True
        return False

    def _error(self, code: int) -> errors.ApiError:
        details: dict[str, Any] = {}
        if code in (429, 504):
            details["retryAfterSeconds"] = self.retry_after_seconds
        return errors.ApiError(code, _REASONS[code], _MESSAGES[code], details=details)


def _concerns(target: Target, info: RequestInfo | None) -> bool:
    if info is None:
        return target == ANY
    return target.matches(info.group, info.plural, info.subresource)


def _setting_values(settings: Mapping[str, str]) -> tuple[float, float | None, int, int | None]:
    """(latency, watch-cut, retry-after, seed) from their spec values; ValueError if one is bad."""
    latency = _seconds(settings.get("latency", "0"), "latency")
    watch_cut = None if "watch-cut" not in settings else _seconds(settings["watch-cut"], "watch-cut")
    retry_after = _integer(settings.get("retry-after", "1"), "retry-after")
    if retry_after < 0:
        raise ValueError(f"retry-after must be >= 0, got {retry_after}")
    seed = None if "seed" not in settings else _integer(settings["seed"], "seed")
    return latency, watch_cut, retry_after, seed


def _seconds(value: str, name: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}")
    return seconds


def _integer(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _item_from_json(
    section: str, item: Mapping[str, Any]
) -> ErrorRate | MalformedAnswer | WatchExpiry | DiscoveryError:
    if section == "discovery":
        group, version = item.get("group"), item.get("version")
        return DiscoveryError(
            item["rate"],
            parse_code(item["code"]),
            None if group is None else str(group),
            None if version is None else str(version),
            Window.from_json(item),
        )
    target = Target.parse(str(item.get("resource", "*")))
    window = Window.from_json(item)
    if section == "errors":
        return ErrorRate(str(item["verb"]), item["rate"], parse_code(item["code"]), target, window)
    if section == "malformed":
        return MalformedAnswer(str(item["kind"]), target, window)
    return WatchExpiry(item["rate"], target, window)
