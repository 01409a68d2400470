"""The three patch formats of the Kubernetes API, chosen by the request's Content-Type.

- JSON merge patch, RFC 7386 (``application/merge-patch+json``): objects merge, ``null`` deletes,
  everything else (lists included) replaces.
- JSON patch, RFC 6902 (``application/json-patch+json``): a list of operations.
- Strategic merge patch (``application/strategic-merge-patch+json``, built-in kinds only): like a
  merge patch, but lists of objects named in :data:`MERGE_KEYS` merge element-wise by their key,
  ``$patch: delete``/``replace`` directives and ``$deleteFromPrimitiveList/<field>`` apply, and
  ``$setElementOrder``/``$retainKeys`` directives are accepted and ignored. The merge keys are the
  ``patchMergeKey`` struct tags of ``k8s.io/api/core/v1`` for the fields this emulator serves.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from airflow_provider_gang.sim.apiserver import errors, go_format, object_copy

# field name -> patchMergeKey (None: a list of primitives merged as a set, e.g. finalizers)
MERGE_KEYS: dict[str, str | None] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "conditions": "type",
    "ownerReferences": "uid",
    "finalizers": None,
    "topologySpreadConstraints": "topologyKey",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, ``target`` is not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = _copy_unpatched(target, patch)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _copy_unpatched(target: Any, patch: dict[str, Any]) -> dict[str, Any]:
    """``target``'s fields, copied where ``patch`` leaves them (the patched ones are replaced anyway)."""
    if not isinstance(target, dict):
        return {}
    return {key: value if key in patch else object_copy.copy_field(key, value) for key, value in target.items()}


def _invalid_patch(message: str) -> errors.ApiError:
    """A JSON patch that does not apply: upstream hides the reason behind one generic message."""
    return errors.ApiError(422, "Invalid", "the server rejected our request due to an error in our request")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid_patch(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve_parent(document: Any, parts: list[str], path: str) -> tuple[Any, str]:
    current = document
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise _invalid_patch(f"jsonpatch: doc is missing path: {path!r}")
    return current, parts[-1]


def _get(document: Any, path: str) -> Any:
    parent, last = _resolve_parent(document, _pointer(path) or [""], path) if path else (None, "")
    if not path:
        return document
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _invalid_patch(f"jsonpatch: doc is missing path: {path!r}")


def _remove(document: Any, path: str) -> Any:
    parent, last = _resolve_parent(document, _pointer(path), path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _invalid_patch(f"jsonpatch remove operation does not apply: doc is missing path: {path!r}")


def _add(document: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _resolve_parent(document, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _invalid_patch(f"jsonpatch add operation does not apply: index out of range: {path!r}")
    else:
        raise _invalid_patch(f"jsonpatch add operation does not apply: doc is missing path: {path!r}")
    return document


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch. A non-list body is 400 like the Go decoder; a failed op is 422."""
    if not isinstance(operations, list):
        raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise errors.bad_request(f"invalid JSON patch operation: {operation!r}")
        op, path = operation["op"], operation["path"]
        if op == "add":
            document = _add(document, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            _remove(document, path)
        elif op == "replace":
            _get(document, path)
            parts = _pointer(path)
            if not parts:
                document = copy.deepcopy(operation.get("value"))
            else:
                parent, last = _resolve_parent(document, parts, path)
                parent[int(last) if isinstance(parent, list) else last] = copy.deepcopy(operation.get("value"))
        elif op in ("move", "copy"):
            value = _get(document, operation.get("from", ""))
            if op == "move":
                _remove(document, operation["from"])
            document = _add(document, path, copy.deepcopy(value))
        elif op == "test":
            if _get(document, path) != operation.get("value"):
                raise _invalid_patch(
                    f"the server rejected our request due to an error in our request: testing value {path} failed"
                )
        else:
            raise errors.bad_request(f"Unexpected kind: {op}")
    return document


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Strategic merge patch for built-in kinds (see module docstring for the supported subset)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = _copy_unpatched(target, patch)
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [item for item in result.get(name) or [] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str | None) -> list[Any]:
    if merge_key is None:
        merged = list(current)
        merged.extend(item for item in patch if item not in merged)
        return merged
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _not_an_object(patch: Any, field_validation: str) -> errors.ApiError:
    """Upstream's answer to a merge patch that is not a JSON object (``handlers/patch.go``
    ``applyJSPatch``): with Strict/Warn field validation the strict decoder fails first (400); with
    Ignore a list replaces the object, which then has no kind (422), anything else is no merge patch (400),
    as ``null`` is with any validation."""
    if patch is None:
        return errors.bad_request("Invalid JSON Patch")
    if field_validation != "Ignore":
        return errors.bad_request(
            f"error decoding patch: json: cannot unmarshal {go_format.json_type(patch)} into Go value of type "
            "map[string]interface {}"
        )
    if not isinstance(patch, list):
        return errors.bad_request("Invalid JSON Patch")
    raw = json.dumps(patch, separators=(",", ":"))
    detail = (
        "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type "
        'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
    )
    shown = json.dumps(raw)
    cause = errors.field_cause("FieldValueInvalid", "patch", f"Invalid value: {shown}: {detail}")
    return errors.ApiError(422, "Invalid", f' "" is invalid: patch: Invalid value: {shown}: {detail}', [cause])


def apply(current: dict[str, Any], patch: Any, patch_type: str, *, field_validation: str = "Ignore") -> dict[str, Any]:
    """The object after a ``merge``/``apply``/``json``/``strategic`` patch, with the API's errors for a
    body of the wrong JSON type (merge: :func:`_not_an_object`; JSON patch: 400 naming the decoder's
    target type, which depends on ``field_validation`` as upstream; strategic: 400)."""
    if patch_type in ("merge", "apply"):
        if not isinstance(patch, dict):
            raise _not_an_object(patch, field_validation)
        patched = merge_patch(current, patch)
    elif patch_type == "json":
        if patch is not None and not isinstance(patch, list):
            target = "[]handlers.jsonPatchOp" if field_validation != "Ignore" else "jsonpatch.Patch"
            prefix = "error decoding patch: " if field_validation != "Ignore" else ""
            raise errors.bad_request(
                f"{prefix}json: cannot unmarshal {go_format.json_type(patch)} into Go value of type {target}"
            )
        patched = json_patch(current, patch or [])
    elif patch_type == "strategic":
        if not isinstance(patch, dict):
            raise errors.bad_request(
                f"json: cannot unmarshal {go_format.json_type(patch)} into Go value of type map[string]interface {{}}"
            )
        patched = strategic_merge_patch(current, patch)
    else:
        raise errors.unsupported_media_type(patch_type)
    if not isinstance(patched, dict):
        raise errors.bad_request("the patch did not produce an object")
    return patched
