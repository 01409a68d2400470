"""Just enough Kubernetes protobuf to read the one request kubectl sends that way: a
``SelfSubjectAccessReview`` (``kubectl auth can-i``). Answers are always JSON, which client-go
decodes by the response's Content-Type. Any other protobuf body gets 415.

Wire format: the ``k8s\\x00`` magic, then ``runtime.Unknown{typeMeta=1, raw=2, contentEncoding=3,
contentType=4}``; ``raw`` is the object (``k8s.io/api/authorization/v1/generated.proto``:
SelfSubjectAccessReview{metadata=1, spec=2}, spec{resourceAttributes=1, nonResourceAttributes=2},
ResourceAttributes{namespace=1, verb=2, group=3, version=4, resource=5, subresource=6, name=7},
NonResourceAttributes{path=1, verb=2}).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_gang.sim import errors

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
    found: dict[int, bytes] = {}
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, position = _varint(data, position)
        elif wire_type == 2:
            length, position = _varint(data, position)
            found[number] = data[position : position + length]
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
