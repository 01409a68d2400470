"""Just enough Kubernetes protobuf to read what kubectl's imperative commands send that way:
``SelfSubjectAccessReview`` (``kubectl auth can-i``) and Namespace / ConfigMap / Secret bodies
(``kubectl create namespace|configmap|secret``). Answers are always JSON, which client-go decodes
by the response's Content-Type. Any other protobuf body gets 415.

Wire format: the ``k8s\\x00`` magic, then ``runtime.Unknown{typeMeta=1, raw=2, contentEncoding=3,
contentType=4}``; ``raw`` is the object (``k8s.io/api/authorization/v1/generated.proto``:
SelfSubjectAccessReview{metadata=1, spec=2}, spec{resourceAttributes=1, nonResourceAttributes=2},
ResourceAttributes{namespace=1, verb=2, group=3, version=4, resource=5, subresource=6, name=7},
NonResourceAttributes{path=1, verb=2}).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver import errors

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise errors.bad_request("truncated protobuf varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def fields(data: bytes) -> dict[int, bytes]:
    """Length-delimited fields of a message by number (last wins; varints and fixed skipped)."""
    return dict(repeated_fields(data))


def repeated_fields(data: bytes) -> list[tuple[int, bytes]]:
    """Every length-delimited field of a message, in order (repeated and map fields included)."""
    found: list[tuple[int, bytes]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, position = _varint(data, position)
        elif wire_type == 2:
            length, position = _varint(data, position)
            found.append((number, data[position : position + length]))
            position += length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise errors.bad_request(f"unsupported protobuf wire type {wire_type}")
    return found


def decode_subject_access_review(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf ``SelfSubjectAccessReview`` request body."""
    if not body.startswith(_MAGIC):
        raise errors.bad_request("protobuf body without the k8s magic prefix")
    unknown = fields(body[len(_MAGIC) :])
    type_meta = fields(unknown.get(1, b""))
    if type_meta.get(2, b"").decode() != "SelfSubjectAccessReview":
        raise errors.unsupported_media_type(CONTENT_TYPE)
    spec = fields(fields(unknown.get(2, b"")).get(2, b""))
    review: dict[str, Any] = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}
    if 1 in spec:
        attributes = fields(spec[1])
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        review["spec"]["resourceAttributes"] = {
            name: attributes[number].decode() for number, name in enumerate(names, start=1) if number in attributes
        }
    elif 2 in spec:
        attributes = fields(spec[2])
        review["spec"]["nonResourceAttributes"] = {
            name: attributes[number].decode() for number, name in ((1, "path"), (2, "verb")) if number in attributes
        }
    return review


def _string_map(message: bytes, number: int, *, base64_values: bool = False) -> dict[str, str]:
    import base64

    result: dict[str, str] = {}
    for field_number, entry in repeated_fields(message):
        if field_number == number:
            pair = fields(entry)
            value = pair.get(2, b"")
            result[pair.get(1, b"").decode()] = base64.b64encode(value).decode() if base64_values else value.decode()
    return result


def _object_meta(message: bytes) -> dict[str, Any]:
    """ObjectMeta{name=1, generateName=2, namespace=3, labels=11, annotations=12} (the fields kubectl sets)."""
    meta = fields(message)
    result: dict[str, Any] = {
        key: meta[number].decode()
        for number, key in ((1, "name"), (2, "generateName"), (3, "namespace"))
        if number in meta
    }
    for number, key in ((11, "labels"), (12, "annotations")):
        values = _string_map(message, number)
        if values:
            result[key] = values
    return result


def decode_object(body: bytes, expected_kind: str) -> dict[str, Any]:
    """The JSON form of a protobuf Namespace, ConfigMap or Secret body; 415 for anything else.

    ConfigMap{metadata=1, data=2, binaryData=3}; Secret{metadata=1, data=2 (bytes), type=3,
    stringData=4}; Namespace{metadata=1}.
    """
    if not body.startswith(_MAGIC):
        raise errors.bad_request("protobuf body without the k8s magic prefix")
    unknown = fields(body[len(_MAGIC) :])
    type_meta = fields(unknown.get(1, b""))
    kind = type_meta.get(2, b"").decode()
    if kind != expected_kind or kind not in ("Namespace", "ConfigMap", "Secret"):
        raise errors.unsupported_media_type(CONTENT_TYPE)
    raw = unknown.get(2, b"")
    top = fields(raw)
    obj: dict[str, Any] = {
        "apiVersion": type_meta.get(1, b"v1").decode(),
        "kind": kind,
        "metadata": _object_meta(top.get(1, b"")),
    }
    if kind == "ConfigMap":
        for number, key, encoded in ((2, "data", False), (3, "binaryData", True)):
            values = _string_map(raw, number, base64_values=encoded)
            if values:
                obj[key] = values
    elif kind == "Secret":
        data = _string_map(raw, 2, base64_values=True)
        if data:
            obj["data"] = data
        if 3 in top:
            obj["type"] = top[3].decode()
        string_data = _string_map(raw, 4)
        if string_data:
            obj["stringData"] = string_data
    return obj
