"""``metadata.managedFields``: which field manager set which fields, as a kube-apiserver records it.

Upstream: ``k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager`` (now
``k8s.io/apimachinery/pkg/util/managedfields``) over ``sigs.k8s.io/structured-merge-diff/v4``
(``fieldpath``, ``typed``, ``merge``). A field set is a set of paths; a path is a tuple of the
``FieldsV1`` keys that lead to it:

- ``f:<name>``: a field of an object (``f:spec``, ``f:replicas``, a label ``f:app``);
- ``k:{"name":"main"}``: an item of a keyed list, by its merge keys as a JSON object (containers by
  ``name``, conditions by ``type``): built-in kinds and every ``metadata`` by :data:`.patches.MERGE_KEYS`,
  custom resources by their schema's ``x-kubernetes-list-type: map`` and ``x-kubernetes-list-map-keys``;
- ``v:"example.com/finalizer"``: an item of a list of primitives merged as a set (finalizers,
  ``x-kubernetes-list-type: set``);
- ``i:0``: an item of a list by index (decoded, never produced: other lists are atomic, owned whole).

``FieldsV1`` nests these keys; a path that is a member and also has members below it carries ``".": {}``.

An *Update* (create, PUT, merge/JSON/strategic patch) gives its manager the fields it added or changed,
taken from every other manager (an update always forces), and every manager loses the fields the
update removed; the entries of one manager (same manager, operation, apiVersion and subresource) are
merged, and ``time`` moves only when the manager took a field. Entries that own nothing are dropped.
Not recorded, as upstream's ``stripMetaManager``: ``apiVersion``, ``kind``, ``metadata.name``,
``namespace``, ``uid``, ``resourceVersion``, ``generation``, ``creationTimestamp``, ``selfLink``,
``managedFields``; nor ``status`` on main-resource writes of a kind with a status subresource (its
reset fields). Deviation: whether a newly added object node is a member (``".": {}``) depends on Go
pointer-ness upstream; here it is a member for map-valued fields (labels, annotations, resources'
limits/requests, ...) of built-in kinds and for every object node of custom resources, never for
``metadata`` itself.

This module owns the field sets, their ``FieldsV1`` encoding and what an Update does to the entries;
an Apply's merge and conflicts are :mod:`.server_side_apply`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gang_sim.apiserver.patches import MERGE_KEYS
from gang_sim.apiserver.registry import ResourceType

Object = dict[str, Any]
Path = tuple[str, ...]
FieldSet = frozenset[Path]

DEFAULT_MANAGER = "gang-sim"
_STRIPPED_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "selfLink", "managedFields"}
)
# map-valued fields of built-in kinds: added as a whole, they are members themselves (".")
_MAP_FIELDS = frozenset(
    {
        "labels",
        "annotations",
        "nodeSelector",
        "limits",
        "requests",
        "data",
        "binaryData",
        "stringData",
        "capacity",
        "allocatable",
    }
)


@dataclass(frozen=True)
class Shape:
    """How paths are drawn for one kind: ``custom`` (every new object node is a member) and whether
    the kind has a ``status`` subresource (then ``status`` is not tracked on main-resource writes)."""

    custom: bool = False
    status_subresource: bool = False
    # a custom resource's openAPIV3Schema: its lists follow x-kubernetes-list-type (default atomic)
    schema: Object | None = field(default=None, compare=False, hash=False)


def shape_of(resource_type: ResourceType) -> Shape:
    schema = (resource_type.schema or {}) if resource_type.custom else None
    return Shape(resource_type.custom, "status" in resource_type.subresources, schema)


def child_schema(schema: Object | None, name: str, prefix: Path = ()) -> Object | None:
    """The schema of field ``name`` below ``schema``: None (built-in rules, also for every object's
    ``metadata``, typed as ObjectMeta upstream) or a CRD schema node (``{}`` when it declares none)."""
    if schema is None or (not prefix and name == "metadata"):
        return None
    declared = (schema.get("properties") or {}).get(name)
    if declared is None and isinstance(schema.get("additionalProperties"), dict):
        declared = schema["additionalProperties"]
    return declared if isinstance(declared, dict) else {}


@dataclass
class Entry:
    """One ``managedFields`` entry, decoded. ``fields`` is the set of paths the manager owns."""

    manager: str
    operation: str
    api_version: str
    time: str = ""
    subresource: str = ""
    fields: set[Path] = field(default_factory=set)
    # the decoded fieldsV1, kept while ``fields`` is unchanged so encoding can reuse it
    encoded_fields: Object | None = field(default=None, compare=False, repr=False)

    def take(self, paths: set[Path]) -> None:
        """Remove ``paths`` from what this manager owns."""
        if not self.fields.isdisjoint(paths):
            self.fields -= paths
            self.encoded_fields = None

    def identity(self) -> tuple[str, str, str, str]:
        """Entries with one identity are one manager: an applier's identity has no apiVersion
        (upstream ``BuildManagerIdentifier``)."""
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, version, self.subresource)

    def shown(self) -> str:
        """The manager as upstream's conflict messages print it (``printManager``)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> Object:
        entry: Object = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.encoded_fields if self.encoded_fields is not None else encode_fields(self.fields),
        }
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def manager_from_user_agent(user_agent: str) -> str:
    """The default field manager: the User-Agent up to its first ``/`` (upstream ``prefixFromUserAgent``)."""
    return user_agent.split("/", 1)[0] or DEFAULT_MANAGER


# ----------------------------------------------------------------- encoding


def encode_fields(paths: set[Path] | FieldSet) -> Object:
    """A field set as ``fieldsV1``: nested keys, ``".": {}`` on members that have members below."""
    tree: Object = {}
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    for path in paths:
        node = tree
        for element in path:
            node = node[element]
        if node and "." not in node:
            node["."] = {}
    return _sorted_tree(tree)


def _sorted_tree(tree: Object) -> Object:
    return {key: _sorted_tree(tree[key]) for key in sorted(tree)}


def decode_fields(tree: Any, prefix: Path = ()) -> set[Path]:
    """The field set of a ``fieldsV1`` tree (ValueError when it is not one)."""
    if not isinstance(tree, dict):
        raise ValueError("fieldsV1 must be an object")
    paths: set[Path] = set()
    if prefix and (not tree or "." in tree):
        paths.add(prefix)
    for key, child in tree.items():
        if key == ".":
            continue
        if key[:2] not in ("f:", "k:", "v:", "i:"):
            raise ValueError(f"unknown path element {key!r}")
        paths |= decode_fields(child, (*prefix, key))
    return paths


def decode_entries(raw: Any) -> list[Entry] | None:
    """``metadata.managedFields`` decoded; None when absent, empty or not valid (then upstream keeps
    the live object's entries)."""
    if not isinstance(raw, list) or not raw:
        return None
    entries = []
    try:
        for item in raw:
            if not isinstance(item, dict):
                return None
            encoded = item.get("fieldsV1") or {}
            entries.append(
                Entry(
                    manager=str(item.get("manager") or ""),
                    operation=str(item.get("operation") or "Update"),
                    api_version=str(item.get("apiVersion") or ""),
                    time=str(item.get("time") or ""),
                    subresource=str(item.get("subresource") or ""),
                    fields=decode_fields(encoded),
                    encoded_fields=encoded,
                )
            )
    except ValueError:
        return None
    return entries


def encode_entries(entries: list[Entry]) -> list[Object]:
    """Entries without fields dropped, in upstream's order: operation (Apply before Update), time,
    manager, apiVersion, subresource (``sortEncodedManagedFields``)."""
    kept = [entry for entry in entries if entry.fields]
    kept.sort(key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    return [entry.encode() for entry in kept]


# ----------------------------------------------------------------- paths of an object


def list_items(name: str, items: list[Any], schema: Object | None = None) -> list[tuple[str, Any]] | None:
    """The path elements of a keyed or set list's items, or None for an atomic list. Built-in kinds
    (``schema`` None) key lists by :data:`.patches.MERGE_KEYS`; a CRD schema node by its
    ``x-kubernetes-list-type`` (``map`` with ``x-kubernetes-list-map-keys``, ``set``, else atomic)."""
    if not items:
        return None
    if schema is None:
        if name not in MERGE_KEYS:
            return None
        merge_key = MERGE_KEYS[name]
        keys, is_set = ([] if merge_key is None else [merge_key]), merge_key is None
    else:
        list_type = schema.get("x-kubernetes-list-type")
        keys, is_set = list(schema.get("x-kubernetes-list-map-keys") or []), list_type == "set"
        if list_type not in ("map", "set") or (list_type == "map" and not keys):
            return None
    if is_set:
        if any(isinstance(item, (dict, list)) for item in items):
            return None
        return [("v:" + json.dumps(item, separators=(",", ":")), item) for item in items]
    if not all(isinstance(item, dict) and all(key in item for key in keys) for item in items):
        return None
    return [
        ("k:" + json.dumps({key: item[key] for key in sorted(keys)}, separators=(",", ":")), item) for item in items
    ]


def item_schema(schema: Object | None) -> Object | None:
    """The schema of a list's items (None: built-in rules)."""
    if schema is None:
        return None
    items = schema.get("items")
    return items if isinstance(items, dict) else {}


def tracked(obj: Object, shape: Shape, subresource: str | None) -> Object:
    """The part of an object whose fields are owned: server-set metadata stripped, and ``status``
    dropped from main-resource writes of a kind with a status subresource."""
    view = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _STRIPPED_METADATA}
    view.pop("metadata", None)
    if metadata:
        view["metadata"] = metadata
    if shape.status_subresource and subresource != "status":
        view.pop("status", None)
    return view


def flatten(value: Object, shape: Shape) -> tuple[dict[Path, Any], set[Path]]:
    """``(leaves, nodes)`` of an object: leaves (scalars, atomic lists, empty objects) with their values,
    and the object nodes and list items that may be members when newly added."""
    return _flatten(value, shape, (), shape.schema)


def _flatten(value: Object, shape: Shape, prefix: Path, schema: Object | None) -> tuple[dict[Path, Any], set[Path]]:
    leaves: dict[Path, Any] = {}
    nodes: set[Path] = set()
    for name, child in value.items():
        path = (*prefix, f"f:{name}")
        below = child_schema(schema, name, prefix)
        if isinstance(child, dict) and child:
            if (shape.custom or name in _MAP_FIELDS) and path != ("f:metadata",):
                nodes.add(path)
            sub_leaves, sub_nodes = _flatten(child, shape, path, below)
            leaves.update(sub_leaves)
            nodes |= sub_nodes
        elif isinstance(child, list) and (items := list_items(name, child, below)) is not None:
            for element, item in items:
                item_path = (*path, element)
                if isinstance(item, dict):
                    nodes.add(item_path)
                    sub_leaves, sub_nodes = _flatten(item, shape, item_path, item_schema(below))
                    leaves.update(sub_leaves)
                    nodes |= sub_nodes
                else:
                    leaves[item_path] = item
        else:
            leaves[path] = child
    return leaves, nodes


def field_set(config: Object, shape: Shape) -> set[Path]:
    """The fields an applied configuration sets (upstream ``TypedValue.ToFieldSet``): its leaves and
    list items, not the object fields that hold them."""
    leaves, nodes = flatten(config, Shape(False, shape.status_subresource, shape.schema))
    return set(leaves) | {path for path in nodes if path[-1][:2] in ("k:", "v:")}


def compare(old: Object, new: Object, shape: Shape) -> tuple[set[Path], set[Path]]:
    """``(added_or_changed, removed)`` between two tracked views (upstream ``TypedValue.Compare``)."""
    old_leaves, old_nodes = flatten(old, shape)
    new_leaves, new_nodes = flatten(new, shape)
    changed = {path for path, value in new_leaves.items() if path not in old_leaves or old_leaves[path] != value}
    changed |= new_nodes - old_nodes - set(old_leaves)
    removed = (set(old_leaves) - set(new_leaves) - new_nodes) | (old_nodes - new_nodes - set(new_leaves))
    return changed, removed


# ----------------------------------------------------------------- recording an update


def record_update(
    old: Object | None,
    new: Object,
    *,
    manager: str,
    subresource: str | None,
    shape: Shape,
    now: str,
) -> list[Object]:
    """The ``managedFields`` of ``new`` after an Update by ``manager`` (see module docstring).

    The starting entries are the ones ``new`` carries (a client may set them; a patch carries the live
    ones) unless absent or invalid or this is a subresource write, then ``old``'s.
    """
    entries = None if subresource else decode_entries(new.get("metadata", {}).get("managedFields"))
    if entries is None:
        entries = decode_entries((old or {}).get("metadata", {}).get("managedFields")) or []
    old_view = tracked(old, shape, subresource) if old is not None else {}
    changed, removed = compare(old_view, tracked(new, shape, subresource), shape)
    mine = Entry(manager, "Update", str(new.get("apiVersion") or ""), now, subresource or "")
    for entry in entries:
        entry.take(changed | removed)
    existing = next((entry for entry in entries if entry.identity() == mine.identity()), None)
    if changed:
        if existing is None:
            entries.append(mine)
            existing = mine
        existing.fields |= changed
        existing.encoded_fields = None
        existing.time = now
    return encode_entries(entries)


def assign(
    resource_type: ResourceType,
    new: Object,
    old: Object | None,
    manager: str,
    subresource: str | None,
    given: list[Object] | None,
    now: str,
) -> None:
    """Set ``new``'s ``managedFields``: ``given`` (a server-side apply's), or the Update of ``manager``;
    the old entries stay when only their times would change, so a write that changes nothing stays a
    no-op (upstream ``IgnoreManagedFieldsTimestampsTransformer``)."""
    entries = given
    if entries is None:
        entries = record_update(
            old, new, manager=manager, subresource=subresource, shape=shape_of(resource_type), now=now
        )
    previous = (old or {}).get("metadata", {}).get("managedFields")
    if previous is not None and same_but_time(entries, previous):
        entries = previous
    if entries:
        new["metadata"]["managedFields"] = entries
    else:
        new["metadata"].pop("managedFields", None)


def same_but_time(first: Any, second: Any) -> bool:
    """Whether two ``managedFields`` lists differ at most in their timestamps (upstream then keeps the
    old ones, so a write that changes nothing else stays a no-op)."""
    if not isinstance(first, list) or not isinstance(second, list) or len(first) != len(second):
        return bool(first == second)
    return all(
        isinstance(a, dict)
        and isinstance(b, dict)
        and a.keys() == b.keys()
        and all(a[k] == b[k] for k in a if k != "time")
        for a, b in zip(first, second, strict=True)
    )
