"""The ``[gang]`` options record: parsing configured values, the provider-info form, client option checks."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_gang.reservation import deployment
from airflow_provider_gang.reservation.deployment import BY_NAME, ConfigurationError


@pytest.mark.parametrize(
    ("option", "text", "value"),
    [
        ("client_retry_attempts", "20", 20),
        ("client_request_timeout", "2.5", 2.5),
        ("default_cloud", " eks ", "eks"),
        ("watch_timeout", "0", 0),
    ],
)
def test_a_configured_value_is_read_as_its_kind(option: str, text: str, value: Any) -> None:
    assert BY_NAME[option].parse(text) == value


@pytest.mark.parametrize(
    ("option", "text", "said"),
    [
        ("client_retry_attempts", "2.5", "'2.5' is not a whole number"),
        ("heartbeat_interval", "soon", "'soon' is not a number"),
        ("client_qps", "-1", "'-1' is negative"),
    ],
)
def test_a_malformed_value_names_the_option_and_its_variable(option: str, text: str, said: str) -> None:
    with pytest.raises(ConfigurationError, match=said) as caught:
        BY_NAME[option].parse(text)
    assert caught.value.option == option
    assert f"[gang] {option}" in str(caught.value) and f"AIRFLOW__GANG__{option.upper()}" in str(caught.value)


def test_the_provider_config_section_holds_every_option_as_airflow_describes_one() -> None:
    section = deployment.provider_config()["gang"]
    assert section["description"] and set(section["options"]) == set(BY_NAME)
    assert section["options"]["client_burst"] == {
        "description": BY_NAME["client_burst"].description,
        "version_added": deployment.VERSION_ADDED,
        "type": "integer",
        "example": "100",
        "default": "1000",
    }


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"retries": 1}, "unknown client option"),
        ({"qps": "fast"}, "qps must be a number >= 0"),
        ({"qps": True}, "qps must be a number >= 0"),
        ({"burst": 0.5}, "burst must be a whole number >= 1"),
        ({"max_parallel_requests": 65}, "max_parallel_requests must be <= 64"),
        ({"request_timeout": 0}, "request_timeout must be > 0"),
    ],
)
def test_client_option_problems_are_named(values: dict[str, Any], said: str) -> None:
    problem = deployment.client_option_problem(values)
    assert problem is not None and said in problem


def test_good_client_options_have_no_problem() -> None:
    assert deployment.client_option_problem({}) is None
    assert deployment.client_option_problem(dict(deployment.CLIENT_DEFAULTS)) is None
