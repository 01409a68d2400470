"""Parse Kubernetes API request paths into request attributes (upstream ``RequestInfoFactory``).

``/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]`` and the same under
``/apis/{group}/{version}``. ``/api/v1/namespaces/{name}[/{subresource}]`` addresses a Namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


def parse_bool(value: str | None) -> bool:
    """Go's ``strconv.ParseBool`` truth values (clients send ``watch=True`` and ``watch=true``)."""
    return value in _TRUE


@dataclass(frozen=True)
class RequestInfo:
    """A resource request: what it addresses and its RBAC verb."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None
    verb: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource_key(self) -> str:
        return f"{self.api_version}/{self.plural}"

    @property
    def rbac_resource(self) -> str:
        return f"{self.plural}/{self.subresource}" if self.subresource else self.plural

    @property
    def metric_resource(self) -> str:
        plural = f"{self.plural}.{self.group}" if self.group else self.plural
        return f"{plural}/{self.subresource}" if self.subresource else plural


def authorized_name(info: RequestInfo, query: Mapping[str, str]) -> str | None:
    """The object name a request is authorized for: its path's, or for a LIST or WATCH the value of
    a ``metadata.name=`` field selector (upstream ``RequestInfoFactory.NewRequestInfo``,
    ``k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``, so a ``resourceNames`` rule covers a
    watch of one object)."""
    if info.name or info.verb not in ("list", "watch"):
        return info.name
    for requirement in (query.get("fieldSelector") or "").split(","):
        key, _, value = requirement.partition("=")  # "metadata.name=x" or "metadata.name==x"; "!=" stays
        if key.strip() == "metadata.name" and value:
            return value.removeprefix("=").strip()
    return None


def group_version_of(path: str) -> tuple[str, str, list[str]] | None:
    """(group, version, remaining segments) of an API path; None if it is not under /api or /apis."""
    segments = [s for s in path.split("/") if s]
    if len(segments) >= 2 and segments[0] == "api":
        return "", segments[1], segments[2:]
    if len(segments) >= 3 and segments[0] == "apis":
        return segments[1], segments[2], segments[3:]
    return None


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo | None:
    """The resource request a path addresses, or None for discovery paths."""
    located = group_version_of(path)
    if located is None:
        return None
    group, version, rest = located
    if not rest:
        return None
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = "/".join(rest[2:]) if len(rest) >= 3 else None
    watching = parse_bool(query.get("watch"))
    if method in ("GET", "HEAD"):
        verb = "watch" if watching else ("get" if name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = method.lower()
    return RequestInfo(group, version, plural, namespace, name, subresource, verb)
