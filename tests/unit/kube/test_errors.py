"""Status answers map once to the typed error tree (kube/errors.py docstring)."""

from __future__ import annotations

import pytest

from airflow_provider_gang.kube import errors


def status(code: int, reason: str, message: str = "m", **extra: object) -> dict[str, object]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        **extra,
    }


@pytest.mark.parametrize(
    ("code", "reason", "expected", "retryable"),
    [
        pytest.param(400, "BadRequest", errors.BadRequest, False, id="400-bad-request"),
        pytest.param(401, "Unauthorized", errors.Unauthorized, False, id="401-unauthorized"),
        pytest.param(403, "Forbidden", errors.Forbidden, False, id="403-forbidden"),
        pytest.param(404, "NotFound", errors.NotFound, False, id="404-not-found"),
        pytest.param(405, "MethodNotAllowed", errors.BadRequest, False, id="405-method"),
        pytest.param(409, "Conflict", errors.Conflict, False, id="409-conflict"),
        pytest.param(409, "AlreadyExists", errors.AlreadyExists, False, id="409-already-exists"),
        pytest.param(410, "Expired", errors.Gone, False, id="410-gone"),
        pytest.param(415, "UnsupportedMediaType", errors.BadRequest, False, id="415-media-type"),
        pytest.param(422, "Invalid", errors.Invalid, False, id="422-invalid"),
        pytest.param(429, "TooManyRequests", errors.Unavailable, True, id="429-throttled"),
        pytest.param(500, "InternalError", errors.Unavailable, True, id="500-internal"),
        pytest.param(503, "ServiceUnavailable", errors.Unavailable, True, id="503-unavailable"),
        pytest.param(418, "Teapot", errors.BadRequest, False, id="other-4xx"),
    ],
)
def test_status_code_maps_to_one_typed_error(code, reason, expected, retryable):
    error = errors.from_status(code, status(code, reason, "boom"))
    assert type(error) is expected
    assert (error.code, error.reason, error.message) == (code, reason, "boom")
    assert error.retryable is retryable
    assert isinstance(error, errors.KubeError)


def test_already_exists_is_a_conflict():
    assert isinstance(errors.from_status(409, status(409, "AlreadyExists")), errors.Conflict)


def test_invalid_carries_field_causes():
    body = status(
        422,
        "Invalid",
        details={
            "causes": [
                {"field": "spec.podSets[0].count", "reason": "FieldValueInvalid", "message": "must be >= 1"},
                {"field": "metadata.name", "reason": "FieldValueInvalid", "message": "not DNS"},
            ]
        },
    )
    error = errors.from_status(422, body)
    assert isinstance(error, errors.Invalid)
    assert [cause.field for cause in error.causes] == ["spec.podSets[0].count", "metadata.name"]
    assert error.causes[0].message == "must be >= 1"


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), (" 1.5 ", 1.5), ("-4", 0.0), ("Wed, 21 Oct 2015 07:28:00 GMT", None), (None, None)],
    ids=["integer", "fraction", "negative-clamped", "http-date-ignored", "absent"],
)
def test_retry_after_is_kept_on_unavailable(header, seconds):
    error = errors.from_status(429, status(429, "TooManyRequests"), header)
    assert isinstance(error, errors.Unavailable)
    assert error.retry_after == seconds


def test_non_json_body_still_maps_by_code():
    error = errors.from_status(502, "<html>bad gateway</html>")
    assert isinstance(error, errors.Unavailable)
    assert error.reason == "HTTP502"
    assert "bad gateway" in error.message
