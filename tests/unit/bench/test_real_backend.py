"""How bench/real_backend.py reads the real apiserver's request counters: Prometheus text exposition
(https://prometheus.io/docs/instrumenting/exposition_formats/) of ``apiserver_request_total`` and
``apiserver_longrunning_requests``, with the label set of ``k8s.io/apiserver/pkg/endpoints/metrics``."""

from __future__ import annotations

import pytest

from bench import real_backend


def sample(metric: str, verb: str, resource: str, value: float, *, group: str = "", subresource: str = "") -> str:
    labels = (
        f'code="200",component="apiserver",dry_run="",group="{group}",resource="{resource}",'
        f'scope="namespace",subresource="{subresource}",verb="{verb}",version="v1"'
    )
    return f"{metric}{{{labels}}} {value}"


BEFORE = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
        "# TYPE apiserver_request_total counter",
        sample("apiserver_request_total", "LIST", "provisioningrequests", 3, group="autoscaling.x-k8s.io"),
        sample("apiserver_request_total", "PUT", "leases", 10, group="coordination.k8s.io"),
        sample("apiserver_request_total", "WATCH", "pods", 1),
        sample("apiserver_longrunning_requests", "WATCH", "pods", 4),
    ]
)
AFTER = "\n".join(
    [
        sample("apiserver_request_total", "LIST", "provisioningrequests", 7, group="autoscaling.x-k8s.io"),
        sample("apiserver_request_total", "PUT", "leases", 13, group="coordination.k8s.io"),
        sample("apiserver_request_total", "WATCH", "pods", 3),
        sample("apiserver_request_total", "PATCH", "pods", 5, subresource="status"),
        sample("apiserver_request_total", "GET", "", 2, subresource="openapi/v3"),
        sample("apiserver_request_total", "LIST", "events", 1),
        sample("apiserver_request_total", "POST", "events", 4),
        sample("apiserver_longrunning_requests", "WATCH", "pods", 6),
        sample("apiserver_longrunning_requests", "WATCH", "leases", 9, group="coordination.k8s.io"),
    ]
)


@pytest.mark.parametrize(
    ("labels", "name"),
    [
        ({"resource": "pods"}, "pods"),
        ({"resource": "pods", "subresource": "status"}, "pods/status"),
        ({"resource": "workloads", "group": "kueue.x-k8s.io"}, "workloads.kueue.x-k8s.io"),
        ({"resource": "", "subresource": "openapi/v3"}, "/openapi/v3"),
    ],
    ids=["core", "subresource", "group", "non-resource"],
)
def test_a_resource_is_named_as_the_emulator_names_it(labels: dict[str, str], name: str) -> None:
    assert real_backend.resource_name(labels) == name


def test_samples_are_summed_by_verb_and_resource_and_other_metrics_ignored() -> None:
    samples = real_backend.parse_samples(BEFORE + "\n" + BEFORE, "apiserver_request_total")
    assert samples == {
        ("list", "provisioningrequests.autoscaling.x-k8s.io"): 6.0,
        ("put", "leases.coordination.k8s.io"): 20.0,
        ("watch", "pods"): 2.0,
    }


def test_the_delta_counts_the_reads_of_gang_kinds_and_the_rest_as_background() -> None:
    before = real_backend.parse_samples(BEFORE, "apiserver_request_total")
    after = real_backend.parse_samples(AFTER, "apiserver_request_total")
    report = real_backend.delta_report(before, after)
    assert report == {
        "total": 7,
        "requests": {
            "list": {"events": 1, "provisioningrequests.autoscaling.x-k8s.io": 4},
            "watch": {"pods": 2},
        },
        "background": 3 + 5 + 2 + 4,
    }


def test_open_watches_of_gang_kinds_are_the_measured_ones() -> None:
    samples = real_backend.parse_samples(AFTER, "apiserver_longrunning_requests")
    measured = {key: value for key, value in samples.items() if real_backend.is_measured(*key)}
    assert measured == {("watch", "pods"): 6.0}
