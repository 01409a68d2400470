"""Resource requests: get, list (selectors, limit/continue), create, update, patch, delete.

Answers as a real apiserver: create 201 with the stored object; list envelopes with ``kind``,
``apiVersion`` and ``metadata.resourceVersion``; PATCH chosen by Content-Type (415 for unknown types
and for strategic merge on custom resources); DELETE returns the object for built-in kinds and a
``Status`` Success for custom resources once gone. GET and LIST answers may be altered by the
``malformed`` fault (:mod:`.faults`); the stored objects never are.

This module owns the verbs on stored objects; watches (:mod:`.watching`), pod logs (:mod:`.podlogs`)
and discovery (:mod:`.discovery`) are their own modules.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import yaml
from aiohttp import web

from gang_sim.apiserver import errors, managed_fields
from gang_sim.apiserver.http import malformed, podlogs, protobuf, requestlog, tables, watching
from gang_sim.apiserver.http.context import ApiContext, json_response, success_status
from gang_sim.apiserver.http.paths import RequestInfo
from gang_sim.apiserver.registry import ResourceType

_RETURNS_DELETED_OBJECT = frozenset({"/pods", "/podtemplates", "/namespaces"})
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


_KIND_STRUCT = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'


def _summary(raw: bytes, length: int = 30) -> str:
    """A request body as upstream's decode errors cite it (``summarizeData``): its first 30 bytes."""
    if not raw:
        return "<empty>"
    cut = raw[:length]
    shown = cut.decode(errors="replace") if raw[:1] == b"{" else cut.hex()
    return shown + (" ..." if len(raw) > length else "")


def _unrecognized(kind: str, detail: str, raw: bytes) -> errors.ApiError:
    """The decoder's 400 for an object body it cannot read (``transformDecodeError``)."""
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {kind}): {detail} ({_summary(raw)})"
    )


def _unparsable(kind: str, detail: str, raw: bytes) -> errors.ApiError:
    return _unrecognized(kind, f"couldn't get version/kind; json parse error: {detail}", raw)


async def read_patch(request: web.Request, patch_type: str) -> Any:
    """A PATCH body. A JSON patch type whose body is not JSON (or is empty) is 400 ``invalid JSON patch``
    (``handlers/patch.go`` ``validateAndTranscodePatch``)."""
    raw = await request.read()
    if patch_type == "apply":
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise errors.bad_request(f"error converting YAML to JSON: {error}") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise errors.bad_request("invalid JSON patch") from None


async def _object_body(request: web.Request, kind: str, custom: bool = False) -> dict[str, Any]:
    """A create/update body (JSON or YAML) that must be an object of ``kind``; a custom resource's
    must name its kind (the unstructured decoder cannot default it from the URL)."""
    if request.content_type == protobuf.CONTENT_TYPE:
        return protobuf.decode_object(await request.read(), kind)
    raw = await request.read()
    if not raw.strip():
        raise _unparsable(kind, "unexpected end of JSON input", raw)
    try:
        body = yaml.safe_load(raw) if "yaml" in request.content_type else json.loads(raw)
    except (ValueError, yaml.YAMLError) as error:
        raise _unparsable(kind, str(error), raw) from None
    if not isinstance(body, dict):
        raise _unparsable(kind, f"json: cannot unmarshal array into Go value of type {_KIND_STRUCT}", raw)
    if custom and not body.get("kind"):
        raise _unrecognized(kind, f"Object 'Kind' is missing in '{raw.decode(errors='replace')}'", raw)
    return body


def _field_validation(request: web.Request) -> str:
    value = request.query.get("fieldValidation", "Warn") or "Warn"
    if value not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )
    return value


def _dry_run(request: web.Request) -> bool:
    """``dryRun=All`` (the only value upstream accepts); anything else is 400."""
    values = request.query.getall("dryRun", [])
    if any(value != "All" for value in values):
        raise errors.bad_request(f"Invalid dry run value: {values}")
    return bool(values)


def _field_manager(request: web.Request, options: str, patch_type: str | None = None) -> str:
    """The request's field manager: ``fieldManager``, else the User-Agent's prefix (upstream
    ``prefixFromUserAgent``); an apply needs it named (422), ``force`` is for applies only (422)."""
    manager = request.query.get("fieldManager", "")
    causes = []
    if patch_type == "apply" and not manager:
        causes.append(
            errors.field_cause("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")
        )
    if "force" in request.query and patch_type not in (None, "apply"):
        causes.append(
            errors.field_cause("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch")
        )
    if len(manager) > 128:
        causes.append(
            errors.field_cause("FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes")
        )
    if causes:
        raise errors.invalid(options, "", causes, "meta.k8s.io")
    return manager or managed_fields.manager_from_user_agent(request.headers.get("User-Agent", ""))


def _continue_token(start_after: tuple[str, str], resource_version: str) -> str:
    raw = json.dumps({"rv": resource_version, "after": list(start_after)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _list(request: web.Request, context: ApiContext, info: RequestInfo, resource_type: ResourceType) -> web.Response:
    query = request.query
    token, after = query.get("continue"), None
    if token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            after = (str(decoded["after"][0]), str(decoded["after"][1]))
        except (ValueError, KeyError, IndexError, TypeError):
            raise errors.bad_request("continue key is not valid: malformed token") from None
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{query.get("limit")}": invalid syntax') from None
    items, resource_version, remaining = context.store.list_page(
        info.resource_key,
        info.namespace,
        label_selector=query.get("labelSelector", ""),
        field_selector=query.get("fieldSelector", ""),
        after=after,
        limit=max(0, limit),
    )
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if remaining > 0:
        last = items[-1]["metadata"]
        metadata["continue"] = _continue_token((last.get("namespace", ""), last["name"]), resource_version)
        metadata["remainingItemCount"] = remaining
    elif resource_type.custom:  # unstructured lists carry the empty token; typed ones omit it (omitempty)
        metadata["continue"] = ""
    if tables.wants_table(request.headers.get("Accept", "")):
        rendered = tables.table(resource_type, items, resource_version)
        rendered["metadata"] = metadata
        return json_response(rendered)
    if not resource_type.custom:  # typed lists drop their items' apiVersion/kind; custom ones keep them
        items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
    kind = requestlog.malformed_for(request, context.faults, info)
    if kind is not None:
        items = [malformed.apply(kind, item) for item in items]
    body = {
        "kind": resource_type.list_kind,
        "apiVersion": resource_type.api_version,
        "metadata": metadata,
        "items": items,
    }
    return json_response(body)


async def _delete(
    request: web.Request, context: ApiContext, info: RequestInfo, resource_type: ResourceType
) -> web.Response:
    options: dict[str, Any] = {}
    if request.can_read_body:
        raw = await request.read()
        if raw.strip():
            try:
                options = json.loads(raw)
            except ValueError as error:
                raise errors.bad_request(f"couldn't get version/kind; json parse error: {error}") from None
    policy = request.query.get("propagationPolicy") or options.get("propagationPolicy")
    if request.query.get("orphanDependents") in ("true", "True") or options.get("orphanDependents") is True:
        policy = policy or "Orphan"
    preconditions = options.get("preconditions") or {}
    name = info.name or ""
    if preconditions:
        current = context.store.get(info.resource_key, name, info.namespace)
        for key in ("uid", "resourceVersion"):
            if preconditions.get(key) and preconditions[key] != current["metadata"].get(key):
                raise errors.conflict(
                    resource_type.plural,
                    name,
                    resource_type.group,
                    why=f"Precondition failed: {key}: {preconditions[key]}, {key} in object meta: "
                    f"{current['metadata'].get(key)}",
                )
    grace = request.query.get("gracePeriodSeconds") or options.get("gracePeriodSeconds")
    try:
        grace_seconds = None if grace is None else int(grace)
    except ValueError:
        raise errors.bad_request(f"gracePeriodSeconds: invalid value {grace!r}") from None
    deleted = context.store.delete(
        info.resource_key,
        name,
        info.namespace,
        propagation_policy=policy,
        grace_period_seconds=grace_seconds,
        dry_run=_dry_run(request),
    )
    # Upstream answers the object when the delete was deferred (finalizers, incl. the garbage
    # collector's orphan/foregroundDeletion; graceful pods) or the kind's registry returns deleted
    # objects (pods, pod templates, namespaces); otherwise a Status Success.
    metadata = deleted["metadata"]
    deferred = bool(metadata.get("finalizers")) or (metadata.get("deletionGracePeriodSeconds") or 0) > 0
    if deferred or resource_type.storage_key in _RETURNS_DELETED_OBJECT:
        return json_response(deleted)
    return json_response(success_status(name, resource_type.group, resource_type.plural, metadata.get("uid", "")))


async def _subject_access_review(request: web.Request, context: ApiContext, user: str) -> web.Response:
    if request.content_type == protobuf.CONTENT_TYPE:
        body = protobuf.decode_subject_access_review(await request.read())
    else:
        body = await _object_body(request, "SelfSubjectAccessReview")
    spec = body.get("spec") or {}
    attributes = spec.get("resourceAttributes")
    if attributes is None:
        allowed, reason = True, "non-resource URLs are allowed"
    else:
        resource = attributes.get("resource", "")
        if attributes.get("subresource"):
            resource = f"{resource}/{attributes['subresource']}"
        allowed = context.authorizer.allows(
            user, attributes.get("verb", ""), attributes.get("group", ""), resource, attributes.get("name") or None
        )
        reason = "allowed by gang-sim rule" if allowed else ""
    body["status"] = {"allowed": allowed} | ({"reason": reason} if reason else {})
    body.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    body["apiVersion"], body["kind"] = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
    return json_response(body, status=201)


async def handle(request: web.Request, context: ApiContext, info: RequestInfo, user: str) -> web.StreamResponse:
    """Serve one resource request (authentication, authorization and faults already applied)."""
    store = context.store
    resource_type = store.resolve(info.resource_key)
    if info.namespace is not None and not resource_type.namespaced:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if info.subresource and info.subresource not in resource_type.subresources:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if info.subresource == "log":
        return await podlogs.serve(request, context, info)
    if info.verb != "create" and info.verb not in resource_type.verbs:
        raise errors.method_not_allowed(f"{info.verb} is not supported on resources of kind {resource_type.plural}")
    namespace = info.namespace
    if info.verb == "watch":
        return await watching.serve(request, context, info, resource_type)
    if info.verb == "list":
        return _list(request, context, info, resource_type)
    if info.verb == "get":
        found = store.get(info.resource_key, info.name or "", namespace)
        if tables.wants_table(request.headers.get("Accept", "")) and not info.subresource:
            return json_response(tables.table(resource_type, [found], found["metadata"]["resourceVersion"]))
        kind = requestlog.malformed_for(request, context.faults, info)
        return json_response(found if kind is None else malformed.apply(kind, found))
    if info.verb == "create":
        if resource_type.key == "authorization.k8s.io/v1/selfsubjectaccessreviews":
            return await _subject_access_review(request, context, user)
        if info.subresource == "binding" and info.name:
            body = await _object_body(request, resource_type.kind)
            store.bind_pod(namespace or "default", info.name, str((body.get("target") or {}).get("name") or ""))
            return json_response(
                {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201
            )
        if info.name:
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        if not resource_type.namespaced or namespace is not None:
            body = await _object_body(request, resource_type.kind, resource_type.custom)
            return json_response(
                store.create(
                    info.resource_key,
                    body,
                    namespace,
                    field_validation=_field_validation(request),
                    dry_run=_dry_run(request),
                    field_manager=_field_manager(request, "CreateOptions"),
                ),
                status=201,
            )
        raise errors.method_not_allowed("the server does not allow this method on the requested resource")
    if info.verb == "update":
        body = await _object_body(request, resource_type.kind, resource_type.custom)
        if (body.get("metadata") or {}).get("name") not in (None, info.name):
            raise errors.bad_request(
                f"the name of the object ({body['metadata']['name']}) does not match the name on the URL ({info.name})"
            )
        body.setdefault("metadata", {})["name"] = info.name
        return json_response(
            store.replace(
                info.resource_key,
                body,
                subresource=info.subresource,
                namespace=namespace,
                field_validation=_field_validation(request),
                dry_run=_dry_run(request),
                field_manager=_field_manager(request, "UpdateOptions"),
            )
        )
    if info.verb == "patch":
        patch_type = PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise errors.unsupported_media_type(request.content_type)
        patch = await read_patch(request, patch_type)
        object_id = (
            resource_type.storage_key,
            (namespace or "default") if resource_type.namespaced else "",
            info.name or "",
        )
        existed = store.stored(object_id) is not None
        patched = store.patch(
            info.resource_key,
            info.name or "",
            patch,
            namespace=namespace,
            patch_type=patch_type,
            subresource=info.subresource,
            field_validation=_field_validation(request),
            dry_run=_dry_run(request),
            field_manager=_field_manager(request, "PatchOptions", patch_type),
            force=request.query.get("force", "") in ("true", "True", "1"),
        )
        return json_response(patched, status=200 if existed else 201)  # an apply that created answers 201
    if info.verb == "delete":
        return await _delete(request, context, info, resource_type)
    if info.verb == "deletecollection":
        items, _ = store.list(
            info.resource_key,
            namespace,
            label_selector=request.query.get("labelSelector", ""),
            field_selector=request.query.get("fieldSelector", ""),
        )
        deleted = [
            store.delete(info.resource_key, item["metadata"]["name"], item["metadata"].get("namespace"))
            for item in items
        ]
        return json_response(
            {
                "kind": resource_type.list_kind,
                "apiVersion": resource_type.api_version,
                "metadata": {"resourceVersion": store.resource_version},
                "items": deleted,
            }
        )
    raise errors.method_not_allowed("the server does not allow this method on the requested resource")
