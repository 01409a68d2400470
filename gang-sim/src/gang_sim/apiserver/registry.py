"""The resource types the emulator serves: built-in kinds plus those of established CRDs.

A *resource key* is ``"<apiVersion>/<plural>"`` (``"v1/pods"``, ``"batch/v1/jobs"``,
``"kueue.x-k8s.io/v1beta2/workloads"``). Versions of one group and plural share storage, like a real
apiserver with conversion strategy ``None`` (only ``apiVersion`` differs between versions); the
*storage key* ``"<group>/<plural>"`` names that shared storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver import errors

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CRD_KEY = "apiextensions.k8s.io/v1/customresourcedefinitions"  # the resource key of CRDs


@dataclass(frozen=True)
class ResourceType:
    """One served resource at one group-version.

    ``subresources`` names the served subresources (``status``, ``log``, ``binding``);
    ``schema`` is the CRD's ``openAPIV3Schema`` for custom resources (``None`` for built-ins);
    ``storage_version`` is the version objects are reported under to ``Store.subscribe`` callbacks;
    ``printer_columns`` are a CRD version's ``additionalPrinterColumns`` (for ``kubectl get`` tables);
    ``feature_gates`` are the alpha feature gates this server has on that guard fields of the kind
    (:mod:`.feature_gates`).
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    custom: bool = False
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    storage_version: str = ""
    categories: tuple[str, ...] = ()
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False, repr=False)
    feature_gates: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.api_version}/{self.plural}"

    @property
    def storage_key(self) -> str:
        return f"{self.group}/{self.plural}"

    @property
    def storage_resource_key(self) -> str:
        """The resource key at the storage version (what subscribers receive)."""
        version = self.storage_version or self.version
        api_version = f"{self.group}/{version}" if self.group else version
        return f"{api_version}/{self.plural}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def qualified_plural(self) -> str:
        """``pods`` or ``provisioningrequests.autoscaling.x-k8s.io`` (as error messages print it)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _core(plural: str, kind: str, namespaced: bool = True, short: tuple[str, ...] = (), sub: str = "") -> ResourceType:
    return ResourceType(
        group="",
        version="v1",
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short,
        subresources=frozenset(s for s in sub.split(",") if s),
        categories=("all",) if plural in ("pods", "services") else (),
    )


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", namespaced=False, short=("ns",), sub="status"),
    _core("pods", "Pod", short=("po",), sub="status,log,binding"),
    _core("podtemplates", "PodTemplate"),
    _core("services", "Service", short=("svc",), sub="status"),
    _core("events", "Event", short=("ev",)),
    _core("nodes", "Node", namespaced=False, short=("no",), sub="status"),
    _core("configmaps", "ConfigMap", short=("cm",)),
    _core("secrets", "Secret"),
    _core("serviceaccounts", "ServiceAccount", short=("sa",)),
    ResourceType("batch", "v1", "jobs", "job", "Job", True, subresources=frozenset({"status"}), categories=("all",)),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        subresources=frozenset({"status"}),
    ),
    # KEP-4671 gang scheduling as Kubernetes v1.37 serves it with the GenericWorkload feature gate and
    # --runtime-config=scheduling.k8s.io/v1beta1=true (k8s.io/api scheduling/v1beta1/types.go:
    # PodGroup with a status subresource, Workload without one). WORKLOAD_API_STORAGE_KEYS lists them
    # for Emulator(serve_workload_api=False), a cluster with the gate off.
    ResourceType(
        "scheduling.k8s.io",
        "v1beta1",
        "podgroups",
        "podgroup",
        "PodGroup",
        True,
        subresources=frozenset({"status"}),
        storage_version="v1beta1",
    ),
    ResourceType("scheduling.k8s.io", "v1beta1", "workloads", "workload", "Workload", True, storage_version="v1beta1"),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
)

WORKLOAD_API_STORAGE_KEYS = ("scheduling.k8s.io/podgroups", "scheduling.k8s.io/workloads")


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The served versions of an ``apiextensions.k8s.io/v1`` CustomResourceDefinition."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = spec.get("versions") or []
    storage = next((v.get("name", "") for v in versions if v.get("storage")), "")
    served: list[ResourceType] = []
    for version in versions:
        if not version.get("served", False):
            continue
        subresources = set((version.get("subresources") or {}).keys())
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        served.append(
            ResourceType(
                group=spec.get("group", ""),
                version=version["name"],
                plural=names.get("plural", ""),
                singular=names.get("singular") or names.get("kind", "").lower(),
                kind=names.get("kind", ""),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                subresources=frozenset(subresources),
                custom=True,
                schema=schema,
                storage_version=storage,
                categories=tuple(names.get("categories") or ()),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            )
        )
    return served


class Registry:
    """Lookup of served resource types by resource key, by group-version and by kind."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._by_key: dict[str, ResourceType] = {}
        for resource_type in types:
            self.add(resource_type)

    def add(self, resource_type: ResourceType) -> None:
        self._by_key[resource_type.key] = resource_type

    def remove_storage(self, storage_key: str) -> None:
        """Stop serving every version stored under ``storage_key`` (its CRD was deleted)."""
        for key in [k for k, t in self._by_key.items() if t.storage_key == storage_key]:
            del self._by_key[key]

    def resolve(self, resource: str) -> ResourceType:
        """The type for a resource key; 404 NotFound like a real server for unknown resources."""
        found = self._by_key.get(resource)
        if found is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return found

    def lookup(self, api_version: str, plural: str) -> ResourceType | None:
        return self._by_key.get(f"{api_version}/{plural}")

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return next((t for t in self._by_key.values() if t.api_version == api_version and t.kind == kind), None)

    def versions_of(self, storage_key: str) -> list[ResourceType]:
        return [t for t in self._by_key.values() if t.storage_key == storage_key]

    def group_versions(self) -> dict[str, list[str]]:
        """Group name -> served versions (core group is ``""``), preferred (storage) version first."""
        result: dict[str, list[str]] = {}
        for resource_type in self._by_key.values():
            versions = result.setdefault(resource_type.group, [])
            if resource_type.version not in versions:
                versions.append(resource_type.version)
        for group, versions in result.items():
            preferred = next(
                (t.storage_version for t in self._by_key.values() if t.group == group and t.storage_version), ""
            )
            versions.sort(key=lambda v: (v != preferred, _version_priority(v)))
        return result

    def in_group_version(self, api_version: str) -> list[ResourceType]:
        return [t for t in self._by_key.values() if t.api_version == api_version]

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_key.values()))


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    import re

    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0)
    major, stage, minor = int(match.group(1)), match.group(2), int(match.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor)
