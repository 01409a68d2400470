"""Fault specs: grammar, targets, windows on a fake clock, JSON/spec round trips, seeded draws, and
the malformed-answer transformations (the HTTP behaviour is in tests/contract/test_faults.py)."""

from __future__ import annotations

import copy

import pytest

from gang_sim.apiserver.http import malformed
from gang_sim.apiserver.http.fault_items import Target
from gang_sim.apiserver.http.faults import Faults
from gang_sim.apiserver.http.paths import RequestInfo


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def request(verb: str, plural: str = "pods", group: str = "", subresource: str | None = None) -> RequestInfo:
    return RequestInfo(group, "v1", plural, "default", "x" if verb != "list" else None, subresource, verb)


def hits(faults: Faults, info: RequestInfo, times: int = 1) -> list[str | None]:
    drawn = [faults.draw_error(info.verb, info) for _ in range(times)]
    return [None if d is None else (d.kind if d.error is None else str(d.error.code)) for d in drawn]


PR = "autoscaling.x-k8s.io"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("*", Target(None, "*", "*")),
        ("pods", Target(None, "pods", "")),
        ("pods/log", Target(None, "pods", "log")),
        ("pods/*", Target(None, "pods", "*")),
        ("*/status", Target(None, "*", "status")),
        ("batch/jobs", Target("batch", "jobs", "")),
        (f"{PR}/provisioningrequests", Target(PR, "provisioningrequests", "")),
        (f"{PR}/provisioningrequests/status", Target(PR, "provisioningrequests", "status")),
    ],
    ids=lambda value: str(value),
)
def test_resource_fields_parse_and_print_back(resource, expected):
    assert Target.parse(resource) == expected
    assert str(expected) == resource


@pytest.mark.parametrize(
    ("target", "info", "matches"),
    [
        ("*", request("get", subresource="log"), True),
        ("pods", request("get"), True),
        ("pods", request("get", subresource="log"), False),  # like RBAC: pods does not cover pods/log
        ("pods/log", request("get", subresource="log"), True),
        ("pods/*", request("get", subresource="status"), True),
        ("pods/*", request("get"), True),
        ("provisioningrequests", request("get", "provisioningrequests", PR), True),  # any group
        (f"{PR}/provisioningrequests", request("get", "provisioningrequests", PR), True),
        ("batch/provisioningrequests", request("get", "provisioningrequests", PR), False),
        ("provisioningrequests/status", request("patch", "provisioningrequests", PR, "status"), True),
        ("provisioningrequests/status", request("patch", "provisioningrequests", PR), False),
        ("configmaps", request("get"), False),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_targets_match_requests(target, info, matches):
    assert Target.parse(target).matches(info.group, info.plural, info.subresource) is matches


def test_errors_per_verb_and_resource_keep_the_old_any_resource_form():
    faults = Faults.parse("create/pods:1.0:503,patch/provisioningrequests/status:1:429,delete:1.0:500")
    assert hits(faults, request("create")) == ["503"]
    assert hits(faults, request("create", "configmaps")) == [None]
    assert hits(faults, request("patch", "provisioningrequests", PR, "status")) == ["429"]
    assert hits(faults, request("patch", "provisioningrequests", PR)) == [None]
    assert hits(faults, request("delete", "anything")) == ["500"]
    assert [(e.verb, e.rate, e.code) for e in faults.error_rates] == [
        ("create", 1.0, 503),
        ("patch", 1.0, 429),
        ("delete", 1.0, 500),
    ]


def test_reset_drop_and_504_are_codes():
    faults = Faults.parse("list/pods:1.0:reset,get/pods:1.0:drop,watch:1.0:504")
    assert hits(faults, request("list")) == ["reset"]
    assert hits(faults, request("get")) == ["drop"]
    injected = faults.draw_error("watch", request("watch"))
    assert injected is not None and injected.error is not None
    assert (injected.error.code, injected.error.reason) == (504, "Timeout")


def test_a_count_window_hits_the_next_n_matching_requests_only():
    faults = Faults.parse("create/pods:1.0:503:count:3")
    assert hits(faults, request("create", "configmaps"), 2) == [None, None]  # not matching: not counted
    assert hits(faults, request("create"), 5) == ["503", "503", "503", None, None]


def test_a_count_window_counts_hits_not_draws():
    faults = Faults.parse("get:0.5:500:count:2,seed:1")
    outcomes = hits(faults, request("get"), 40)
    assert outcomes.count("500") == 2 and outcomes.index("500") < outcomes.index("500", outcomes.index("500") + 1)


def test_a_for_window_ends_on_the_injected_clock():
    clock = FakeClock()
    faults = Faults.parse("*:1.0:503:for:10", clock=clock)
    assert hits(faults, request("get")) == ["503"]
    clock.now += 9.9
    assert hits(faults, request("list")) == ["503"]
    clock.now += 0.1
    assert hits(faults, request("get")) == [None]


def test_count_and_for_together_end_with_whichever_comes_first():
    clock = FakeClock()
    faults = Faults.parse("get:1.0:503:count:2:for:5", clock=clock)
    assert hits(faults, request("get"), 3) == ["503", "503", None]
    later = Faults.parse("get:1.0:503:for:5:count:2", clock=clock)
    clock.now += 5
    assert hits(later, request("get")) == [None]


def test_first_hitting_item_decides_and_spent_items_step_aside():
    faults = Faults.parse("create/pods:1.0:reset:count:1,create:1.0:503")
    assert hits(faults, request("create"), 2) == ["reset", "503"]


def test_same_seed_same_failures_across_items():
    def sequence() -> list[str | None]:
        faults = Faults.parse("get/pods:0.3:500,*:0.2:503,watch-expire:0.5,seed:11")
        drawn = []
        for index in range(30):
            info = request(("get", "list", "watch")[index % 3])
            drawn += hits(faults, info)
            drawn.append(str(faults.draw_watch_expiry(info, "5")))
        return drawn

    first = sequence()
    assert first == sequence() and "500" in first and "503" in first and "True" in first


def test_watch_expire_needs_a_watch_resuming_from_a_version():
    faults = Faults.parse("watch-expire/pods:1.0:count:1")
    assert not faults.draw_watch_expiry(request("get"), "5")
    assert not faults.draw_watch_expiry(request("watch"), None)
    assert not faults.draw_watch_expiry(request("watch"), "0")  # "0": any version, never expired upstream
    assert not faults.draw_watch_expiry(request("watch", "configmaps"), "5")
    assert faults.draw_watch_expiry(request("watch"), "5")
    assert not faults.draw_watch_expiry(request("watch"), "6")  # count:1 spent


def test_malformed_items_apply_to_reads_of_their_resource():
    faults = Faults.parse("malformed/pods:no-status:count:2,malformed/provisioningrequests:truncated-watch")
    assert faults.draw_malformed(request("create")) is None
    assert faults.draw_malformed(request("get", "configmaps")) is None
    assert faults.draw_malformed(request("get")) == "no-status"
    assert faults.draw_malformed(request("watch")) == "no-status"
    assert faults.draw_malformed(request("list")) is None  # count spent
    assert faults.draw_malformed(request("list", "provisioningrequests", PR)) is None  # watches only
    assert faults.draw_malformed(request("watch", "provisioningrequests", PR)) == "truncated-watch"


SPECS = [
    "create:0.5:503,*:0.1:429,latency:0.02,watch-cut:3.0,seed:9",
    "create/pods:1.0:503:count:3,*:1.0:503:for:10.0",
    f"list/pods:1.0:reset:count:1,get/{PR}/provisioningrequests/status:0.25:drop",
    "malformed/pods:no-status,malformed:wrong-type:for:2.5,malformed/batch/jobs:unknown-condition:count:1",
    "watch-expire:1.0,watch-expire/pods:0.5:count:2:for:1.0,retry-after:3",
    "discovery:1.0:503:count:2,discovery/scheduling.k8s.io:0.5:drop,discovery/kueue.x-k8s.io/v1beta2:1.0:reset",
]


@pytest.mark.parametrize("spec", SPECS)
def test_spec_and_json_round_trip(spec):
    faults = Faults.parse(spec)
    assert faults.to_spec() == spec
    assert Faults.parse(faults.to_spec()) == faults
    assert Faults.from_json(faults.to_json()) == faults
    assert Faults.from_json(faults.to_json()).to_json() == faults.to_json()


def test_old_json_documents_are_accepted_and_old_items_print_as_before():
    old = {
        "errors": [{"verb": "list", "rate": 1.0, "code": 500}],
        "latency_seconds": 0.0,
        "watch_cut_seconds": None,
        "retry_after_seconds": 1,
        "seed": 1,
    }
    faults = Faults.from_json(old)
    assert faults == Faults.parse("list:1.0:500,seed:1")
    assert faults.to_json()["errors"] == old["errors"]
    assert Faults.from_json({}) == Faults()


def test_json_items_carry_resource_and_window_keys():
    faults = Faults.parse("create/pods:1.0:reset:count:3:for:4.5,malformed/pods:wrong-type,watch-expire:1.0")
    document = faults.to_json()
    assert document["errors"] == [
        {"verb": "create", "rate": 1.0, "code": "reset", "resource": "pods", "count": 3, "for_seconds": 4.5}
    ]
    assert document["malformed"] == [{"kind": "wrong-type", "resource": "pods"}]
    assert document["watch_expire"] == [{"rate": 1.0}]


@pytest.mark.parametrize(
    ("spec", "path", "hit"),
    [
        ("discovery:1.0:503", "/api", True),
        ("discovery:1.0:503", "/apis/scheduling.k8s.io/v1beta1", True),
        ("discovery/scheduling.k8s.io:1.0:503", "/apis/scheduling.k8s.io", True),
        ("discovery/scheduling.k8s.io:1.0:503", "/apis/scheduling.k8s.io/v1beta1/", True),
        ("discovery/scheduling.k8s.io:1.0:503", "/apis/batch/v1", False),
        ("discovery/scheduling.k8s.io:1.0:503", "/apis", False),
        ("discovery/scheduling.k8s.io/v1beta1:1.0:503", "/apis/scheduling.k8s.io/v1beta1", True),
        ("discovery/scheduling.k8s.io/v1beta1:1.0:503", "/apis/scheduling.k8s.io/v1alpha2", False),
        ("discovery/scheduling.k8s.io/v1beta1:1.0:503", "/apis/scheduling.k8s.io", False),
    ],
)
def test_discovery_items_hit_the_documents_of_their_group_and_version(spec, path, hit):
    injection = Faults.parse(spec).draw_discovery_error(path)
    assert (injection is not None) is hit
    assert injection is None or (injection.error is not None and injection.error.code == 503)


def test_discovery_items_never_hit_resource_requests_and_resource_items_never_hit_discovery():
    faults = Faults.parse("discovery:1.0:503,get/pods:1.0:503")
    assert faults.draw_error("list", request("list")) is None
    assert Faults.parse("*:1.0:503").draw_discovery_error("/apis") is None
    assert [faults.draw_discovery_error("/api") is not None for _ in range(2)] == [True, True]
    assert Faults.parse("discovery:1.0:drop:count:1").draw_discovery_error("/api").kind == "drop"


def test_new_faults_start_new_windows():
    clock = FakeClock()
    spent = Faults.parse("get:1.0:503:count:1:for:1", clock=clock)
    assert hits(spent, request("get"), 2) == ["503", None]
    clock.now += 2
    assert hits(Faults.from_json(spent.to_json(), clock=clock), request("get"), 2) == ["503", None]


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("create:2:503", "rate"),
        ("create:0.1:404", "code"),
        ("create:nan:503", "rate"),
        ("bogus", "expected"),
        ("latency:x", "latency"),
        ("latency:-1", "latency"),
        ("seed:x", "seed"),
        ("fetch/pods:1.0:503", "unknown verb"),
        ("get/a/b/c/d:1.0:503", "resource"),
        ("get//pods:1.0:503", "resource"),
        ("get:1.0:503:count", "pairs"),
        ("get:1.0:503:count:0", "count"),
        ("get:1.0:503:count:1.5", "count"),
        ("get:1.0:503:for:0", "for"),
        ("get:1.0:503:count:1:count:2", "repeated"),
        ("get:1.0:503:until:5", "window"),
        ("malformed/pods:garbled", "malformed kind"),
        ("watch-expire:often", "rate"),
        ("watch-expire", "expected"),
        ("discovery:1.0:404", "code"),
        ("discovery/a/b/c:1.0:503", "discovery path"),
        ("discovery:1.0", "expected"),
    ],
)
def test_malformed_specs_name_the_bad_item(spec, named):
    with pytest.raises(ValueError, match="bad fault item") as raised:
        Faults.parse(f"seed:1,{spec},latency:0")
    assert repr(spec) in str(raised.value) and named in str(raised.value)


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"errors": [{"verb": "get", "rate": 1.0}]}, "errors[0]"),
        ({"errors": [{"verb": "get", "rate": "1", "code": 503}]}, "rate"),
        ({"errors": "get:1:503"}, "errors must be a list"),
        ({"malformed": [{"kind": "no-status"}, {"kind": "nope"}]}, "malformed[1]"),
        ({"watch_expire": [{"rate": 1.0, "count": 0}]}, "count"),
        ({"latency_seconds": "slow"}, "latency"),
    ],
)
def test_malformed_json_names_the_bad_entry(document, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Faults.from_json(document)


PROVISIONING_REQUEST = {
    "apiVersion": f"{PR}/v1",
    "kind": "ProvisioningRequest",
    "metadata": {"name": "gang", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"provisioningClassName": "queued-provisioning.gke.io"},
    "status": {"conditions": [{"type": "Accepted", "status": "True"}]},
}


def test_no_status_drops_status():
    assert "status" not in malformed.apply(malformed.NO_STATUS, PROVISIONING_REQUEST)


def test_unknown_condition_is_added_to_the_known_ones():
    conditions = malformed.apply(malformed.UNKNOWN_CONDITION, PROVISIONING_REQUEST)["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Accepted", malformed.UNKNOWN_CONDITION_TYPE]
    no_status = {k: v for k, v in PROVISIONING_REQUEST.items() if k != "status"}
    added = malformed.apply(malformed.UNKNOWN_CONDITION, no_status)["status"]["conditions"]
    assert [c["type"] for c in added] == [malformed.UNKNOWN_CONDITION_TYPE]


def test_wrong_type_makes_conditions_or_status_a_string():
    assert isinstance(malformed.apply(malformed.WRONG_TYPE, PROVISIONING_REQUEST)["status"]["conditions"], str)
    no_status = {k: v for k, v in PROVISIONING_REQUEST.items() if k != "status"}
    assert isinstance(malformed.apply(malformed.WRONG_TYPE, no_status)["status"], str)


def test_malformed_answers_never_change_the_original():
    original = copy.deepcopy(PROVISIONING_REQUEST)
    for kind in sorted(malformed.OBJECT_KINDS):
        malformed.apply(kind, PROVISIONING_REQUEST)
    assert original == PROVISIONING_REQUEST
    with pytest.raises(ValueError):
        malformed.apply(malformed.TRUNCATED_WATCH, PROVISIONING_REQUEST)


def test_a_truncated_line_is_never_json_nor_a_whole_line():
    line = b'{"type":"ADDED","object":{"kind":"Pod"}}\n'
    cut = malformed.truncate(line)
    assert cut and not cut.endswith(b"\n") and line.startswith(cut) and len(cut) < len(line) - 1


def test_serve_rejects_a_bad_spec_with_a_usage_error_naming_the_item(capsys, tmp_path):
    from gang_sim.cli import build_parser

    parser = build_parser()
    arguments = ["serve", "--kubeconfig-out", str(tmp_path / "k")]
    parsed = parser.parse_args([*arguments, "--faults", "create/pods:1.0:reset:count:3,malformed/pods:no-status"])
    assert parsed.faults.to_spec() == "create/pods:1.0:reset:count:3,malformed/pods:no-status"
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([*arguments, "--faults", "create/pods:1.0:503:count:x"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "argument --faults" in error and "bad fault item 'create/pods:1.0:503:count:x'" in error
