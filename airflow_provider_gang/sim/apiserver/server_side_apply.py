"""Server-side apply (``PATCH`` with ``application/apply-patch+yaml``): field ownership per manager.

Upstream: ``sigs.k8s.io/structured-merge-diff/v4/merge/update.go`` (``Updater.Apply``) and
``k8s.io/apimachinery/pkg/util/managedfields/internal/conflict.go``. An apply by manager M with
configuration C on the live object L:

1. the merged object is L with C merged in (objects merge field by field, keyed lists item by item by
   their merge keys, set lists as sets, everything else is replaced); ``null`` values in C are ignored;
2. the fields the merge adds or changes that another manager owns are conflicts: without ``force``
   the answer is 409 Conflict with one ``FieldManagerConflict`` cause per field; with ``force`` M takes
   them (the other managers lose them). Setting a field to the value it already has is no conflict:
   both managers then own it;
3. M's Apply entry becomes exactly the fields C sets; the fields M applied last time and C no longer
   sets are removed from the object unless another manager owns them (or something below them);
4. the object does not exist: it is created from C (an apply of a subresource is 404 then).

``status`` in C is ignored on the main resource of a kind with a status subresource, and only
``status`` counts on ``/status``, as upstream's reset fields. Deviation: ``managedFields`` in C is not
read, and no ``before-first-apply`` entry is made (every stored object has entries already).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Protocol

from airflow_provider_gang.sim.apiserver import errors, go_format, managed_fields
from airflow_provider_gang.sim.apiserver.managed_fields import Entry, Path, Shape
from airflow_provider_gang.sim.apiserver.object_table import ObjectId
from airflow_provider_gang.sim.apiserver.registry import ResourceType

Object = dict[str, Any]


class Writer(Protocol):
    """What an apply needs of the store (:class:`.store.Store`)."""

    def stored(self, object_id: ObjectId) -> Object | None: ...

    def timestamp(self) -> str: ...

    def create(
        self,
        resource: str,
        body: Object,
        namespace: str | None = None,
        *,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        apply_entries: list[Object] | None = None,
    ) -> Object: ...

    def replace(
        self,
        resource: str,
        body: Object,
        *,
        subresource: str | None = None,
        namespace: str | None = None,
        field_validation: str = "Ignore",
        dry_run: bool = False,
        apply_entries: list[Object] | None = None,
    ) -> Object: ...


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(child) for key, child in value.items() if child is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def merge(live: Any, config: Any, schema: Object | None) -> Any:
    """``live`` with ``config`` merged in (step 1 of the module docstring); neither is modified.
    ``schema`` as :attr:`.managed_fields.Shape.schema`."""
    return _merge(live, config, "", (), schema)


def _merge(live: Any, config: Any, name: str, prefix: Path, schema: Object | None) -> Any:
    if isinstance(live, dict) and isinstance(config, dict):
        result = copy.deepcopy(live)
        for key, value in config.items():
            below = managed_fields.child_schema(schema, key, prefix)
            result[key] = _merge(live.get(key), value, key, (*prefix, f"f:{key}"), below)
        return result
    if isinstance(live, list) and isinstance(config, list):
        live_items = managed_fields.list_items(name, live, schema)
        config_items = managed_fields.list_items(name, config, schema)
        if live_items is not None and config_items is not None:
            merged = [item for _, item in live_items]
            positions = {element: index for index, (element, _) in enumerate(live_items)}
            for element, item in config_items:
                if element in positions:
                    index = positions[element]
                    merged[index] = _merge(
                        merged[index], item, name, (*prefix, element), managed_fields.item_schema(schema)
                    )
                else:
                    positions[element] = len(merged)
                    merged.append(item)
            return copy.deepcopy(merged)
    return copy.deepcopy(config)


class _Pruning:
    """Removing ``removable`` paths nobody keeps (``kept``: the owned paths and their prefixes)."""

    def __init__(self, removable: set[Path], kept: set[Path]) -> None:
        self.removable, self.kept = removable, kept

    def object(self, value: Object, prefix: Path, schema: Object | None) -> Object:
        """``value`` without the removable paths not kept; below a removed node, fields never owned by
        the applier stay, and nodes left empty go."""
        result: Object = {}
        for name, child in value.items():
            path = (*prefix, f"f:{name}")
            below = managed_fields.child_schema(schema, name, prefix)
            if path in self.kept:
                result[name] = self.child(name, child, path, below)
            elif path not in self.removable:
                result[name] = child
            elif isinstance(child, (dict, list)) and (pruned := self.child(name, child, path, below)):
                result[name] = pruned
        return result

    def child(self, name: str, child: Any, path: Path, schema: Object | None) -> Any:
        if isinstance(child, dict):
            return self.object(child, path, schema)
        if isinstance(child, list) and (items := managed_fields.list_items(name, child, schema)) is not None:
            result = []
            for element, item in items:
                item_path = (*path, element)
                if item_path in self.removable and item_path not in self.kept:
                    continue
                below = managed_fields.item_schema(schema)
                result.append(self.object(item, item_path, below) if isinstance(item, dict) else item)
            return result
        return child


def _closure(paths: set[Path]) -> set[Path]:
    return {path[:length] for path in paths for length in range(1, len(path) + 1)}


def path_text(path: Path) -> str:
    """A path as upstream's ``fieldpath.Path.String()`` prints it: ``.spec.containers[name="main"].image``."""
    parts = []
    for element in path:
        kind, rest = element[:2], element[2:]
        if kind == "f:":
            parts.append(f".{rest}")
        elif kind == "k:":
            keys = json.loads(rest)
            parts.append("[" + ",".join(f"{key}={json.dumps(keys[key])}" for key in sorted(keys)) + "]")
        elif kind == "v:":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)


def conflict_error(conflicts: list[tuple[Entry, Path]]) -> errors.ApiError:
    """409 with upstream's message and one ``FieldManagerConflict`` cause per field (``NewConflictError``)."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {entry.shown()}",
            "field": path_text(path),
        }
        for entry, path in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.shown()}: {path_text(path)}"
    else:
        lines: list[str] = []
        for shown in sorted({entry.shown() for entry, _ in conflicts}):
            lines.append(f"conflicts with {shown}:")
            lines += [f"- {path_text(p)}" for entry, p in conflicts if entry.shown() == shown]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, causes)


def applied(
    live: Object | None,
    config: Object,
    *,
    manager: str,
    force: bool,
    subresource: str | None,
    shape: Shape,
    api_version: str,
    now: str,
) -> tuple[Object, list[Object]]:
    """``(object, managedFields)`` after manager's apply of ``config`` to ``live`` (None: absent)."""
    config = _without_nulls(config)
    metadata = {key: value for key, value in config.get("metadata", {}).items() if key != "managedFields"}
    if subresource == "status":
        config = {"status": config.get("status") or {}}
    else:
        config = {key: value for key, value in config.items() if key != "status" or not shape.status_subresource}
        config["metadata"] = metadata
    base = live or {"metadata": {}}
    merged = merge(base, config, shape.schema)
    entries = managed_fields.decode_entries(base.get("metadata", {}).get("managedFields")) or []
    mine = Entry(manager, "Apply", api_version, now, subresource or "")
    previous = next((entry for entry in entries if entry.identity() == mine.identity()), None)
    changed, _ = managed_fields.compare(
        managed_fields.tracked(base, shape, subresource), managed_fields.tracked(merged, shape, subresource), shape
    )
    conflicts = sorted(
        ((entry, path) for entry in entries if entry is not previous for path in entry.fields & changed),
        key=lambda pair: (json.dumps(pair[0].identity()), pair[1]),
    )
    if conflicts and not force:
        raise conflict_error(conflicts)
    for entry in entries:
        if entry is not previous:
            entry.take(changed)
    mine.fields = managed_fields.field_set(managed_fields.tracked(config, shape, subresource), shape)
    entries = [entry for entry in entries if entry is not previous] + [mine]
    if previous is not None:
        removable = _closure(previous.fields - mine.fields)
        kept = _closure(set().union(*(entry.fields for entry in entries)))
        merged = _Pruning(removable, kept).object(merged, (), shape.schema)
    return merged, managed_fields.encode_entries(entries)


def apply(
    store: Writer,
    resource_type: ResourceType,
    name: str,
    config: Any,
    *,
    namespace: str,
    subresource: str | None,
    manager: str,
    force: bool,
    field_validation: str,
    dry_run: bool,
) -> Object:
    """Serve an apply patch on ``store`` (see the module docstring)."""
    if config is None:
        raise errors.bad_request("invalid object type: /, Kind=")
    if not isinstance(config, dict):
        raise errors.bad_request(
            "error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal "
            f"{go_format.json_type(config)} into Go value of type map[string]interface {{}}"
        )
    config = copy.deepcopy(config)
    config.setdefault("metadata", {})
    if not isinstance(config["metadata"], dict):
        raise errors.bad_request("metadata must be an object")
    if config["metadata"].get("name") not in (None, name):
        raise errors.bad_request("the name of the object cannot be changed by a patch")
    config["metadata"]["name"] = name
    existing = store.stored((resource_type.storage_key, namespace, name))
    options: dict[str, Any] = {
        "manager": manager,
        "force": force,
        "shape": managed_fields.shape_of(resource_type),
        "api_version": resource_type.api_version,
        "now": store.timestamp(),
    }
    if existing is None:
        if subresource:
            raise errors.not_found(resource_type.plural, name, resource_type.group)
        body, entries = applied(None, config, subresource=None, **options)
        body["metadata"]["name"] = name
        body["apiVersion"], body["kind"] = config.get("apiVersion"), config.get("kind")
        return store.create(
            resource_type.key,
            body,
            namespace or None,
            field_validation=field_validation,
            dry_run=dry_run,
            apply_entries=entries,
        )
    merged, entries = applied(existing, config, subresource=subresource, **options)
    merged["metadata"]["resourceVersion"] = str(
        config["metadata"].get("resourceVersion") or existing["metadata"]["resourceVersion"]
    )
    return store.replace(
        resource_type.key,
        merged,
        subresource=subresource,
        namespace=namespace or None,
        field_validation=field_validation,
        dry_run=dry_run,
        apply_entries=entries,
    )
