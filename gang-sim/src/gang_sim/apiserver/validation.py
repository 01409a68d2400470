"""Object-metadata validation shared by every kind (``apimachinery/pkg/api/validation``).

Messages match upstream so clients and tests see the same text as from a real apiserver.
"""

from __future__ import annotations

import re
from typing import Any

from gang_sim.apiserver import errors, go_format
from gang_sim.apiserver.errors import Cause
from gang_sim.apiserver.registry import ResourceType

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
ANNOTATIONS_SIZE_LIMIT = 256 * 1024  # upstream TotalAnnotationSizeLimitB
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# name format per storage key; everything else is a DNS-1123 subdomain (upstream NameIsDNSSubdomain).
NAME_RULES: dict[str, str] = {"/namespaces": "label", "/services": "dns1035"}


def invalid_value(field: str, value: Any, detail: str) -> Cause:
    """``Invalid value: <value>: <detail>``, the value printed as Go does (:func:`.go_format.bad_value`);
    ``go_format.OMITTED`` prints none."""
    shown = go_format.bad_value(value)
    message = f"Invalid value: {shown}: {detail}" if value is not go_format.OMITTED else f"Invalid value: {detail}"
    return errors.field_cause("FieldValueInvalid", field, message)


def required(field: str, detail: str = "") -> Cause:
    return errors.field_cause("FieldValueRequired", field, "Required value" + (f": {detail}" if detail else ""))


def forbidden(field: str, detail: str) -> Cause:
    return errors.field_cause("FieldValueForbidden", field, f"Forbidden: {detail}")


def validate_name(name: str, rule: str = "subdomain", field: str = "metadata.name") -> list[Cause]:
    """Name format causes (empty when valid)."""
    if rule == "label":
        if len(name) > 63:
            return [invalid_value(field, name, "must be no more than 63 characters")]
        return [] if DNS1123_LABEL.fullmatch(name) else [invalid_value(field, name, LABEL_MESSAGE)]
    if rule == "dns1035":
        if len(name) > 63:
            return [invalid_value(field, name, "must be no more than 63 characters")]
        return [] if DNS1035_LABEL.fullmatch(name) else [invalid_value(field, name, DNS1035_MESSAGE)]
    if len(name) > 253:
        return [invalid_value(field, name, "must be no more than 253 characters")]
    return [] if DNS1123_SUBDOMAIN.fullmatch(name) else [invalid_value(field, name, SUBDOMAIN_MESSAGE)]


def validate_qualified_key(key: str, field: str) -> list[Cause]:
    """A label key (``[prefix/]name``, apimachinery ``content.IsLabelKey``): causes, empty when valid.
    As upstream, an empty or too long name part is also checked against the name pattern."""
    parts = key.split("/")
    if len(parts) > 2:
        detail = QUALIFIED_NAME_MESSAGE.replace("name part ", "a valid label key ", 1)
        return [
            invalid_value(
                field, key, f"{detail} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )
        ]
    prefix, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    causes: list[Cause] = []
    if prefix is not None and not prefix:
        causes.append(invalid_value(field, key, "prefix part must be non-empty"))
    elif prefix is not None:
        if len(prefix) > 253:
            causes.append(invalid_value(field, key, "prefix part must be no more than 253 characters"))
        if not DNS1123_SUBDOMAIN.fullmatch(prefix):
            causes.append(invalid_value(field, key, "prefix part " + SUBDOMAIN_MESSAGE))
    if not name:
        causes.append(invalid_value(field, key, "name part must be non-empty"))
    elif len(name) > 63:
        causes.append(invalid_value(field, key, "name part must be no more than 63 characters"))
    if not _QUALIFIED_NAME.fullmatch(name):
        causes.append(invalid_value(field, key, QUALIFIED_NAME_MESSAGE))
    return causes


def validate_metadata(metadata: dict[str, Any], storage_key: str, namespaced: bool) -> list[Cause]:
    """Causes for name, namespace, labels and annotations (upstream ``ValidateObjectMeta``)."""
    causes: list[Cause] = []
    name = metadata.get("name") or ""
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(validate_name(name, NAME_RULES.get(storage_key, "subdomain")))
    if namespaced and metadata.get("namespace"):
        causes.extend(validate_name(metadata["namespace"], "label", "metadata.namespace"))
    for key, value in (metadata.get("labels") or {}).items():
        causes.extend(validate_qualified_key(key, "metadata.labels"))
        if not isinstance(value, str):
            causes.append(invalid_value("metadata.labels", value, "must be a string"))
        elif len(value) > 63:
            causes.append(invalid_value("metadata.labels", value, "must be no more than 63 characters"))
        elif not _LABEL_VALUE.fullmatch(value):
            causes.append(invalid_value("metadata.labels", value, LABEL_VALUE_MESSAGE))
    annotations = metadata.get("annotations") or {}
    for key in annotations:
        causes.extend(validate_qualified_key(key, "metadata.annotations"))
    total = sum(len(str(key)) + len(str(value)) for key, value in annotations.items())
    if total > ANNOTATIONS_SIZE_LIMIT:  # why client-side `kubectl apply` of a huge CRD fails upstream
        causes.append(
            errors.field_cause(
                "FieldValueTooLong",
                "metadata.annotations",
                f"Too long: must have at most {ANNOTATIONS_SIZE_LIMIT} bytes",
            )
        )
    for index, reference in enumerate(metadata.get("ownerReferences") or []):
        for required_field in ("apiVersion", "kind", "name", "uid"):
            if not reference.get(required_field):
                causes.append(required(f"metadata.ownerReferences[{index}].{required_field}"))
    return causes


def check_body_type(resource_type: ResourceType, body: dict[str, Any]) -> None:
    """Reject a body whose apiVersion/kind disagree with the URL, with the apiserver's answers.

    Custom resources: 400 "Object 'Kind' is missing" without a kind, 422 Invalid with a ``kind`` or
    ``apiVersion`` cause on a mismatch. Built-in kinds default both from the URL and answer a
    mismatch with the decoder's 400 ("... cannot be handled as a Pod ...").
    """
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if resource_type.custom:
        if not kind:
            raise errors.bad_request("Object 'Kind' is missing in request body")
        name = str((body.get("metadata") or {}).get("name") or "")
        if kind != resource_type.kind:
            cause = invalid_value("kind", kind, f"must be {resource_type.kind}")
            raise errors.invalid(str(kind), name, [cause], resource_type.group)
        if api_version and api_version != resource_type.api_version:
            cause = invalid_value("apiVersion", api_version, f"must be {resource_type.api_version}")
            raise errors.invalid(str(kind), name, [cause], resource_type.group)
        return
    shown_kind, shown_version = kind or resource_type.kind, api_version or resource_type.api_version
    if shown_version != resource_type.api_version:
        raise errors.bad_request(
            f'{shown_kind} in version "{shown_version}" cannot be handled as a {resource_type.kind}: '
            f'no kind "{shown_kind}" is registered for version "{shown_version}"'
        )
    if shown_kind != resource_type.kind:
        raise errors.bad_request(
            f'{shown_kind} in version "{shown_version}" cannot be handled as a {resource_type.kind}: '
            f"converting ({shown_version}.{shown_kind}) to ({resource_type.kind}): unknown conversion"
        )
