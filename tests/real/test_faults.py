"""Every kind of API call the provider makes fails once, on the real control plane, per mode.

The faults come from :class:`~tests.real.fault_proxy.FaultProxy` between the provider and the real
kube-apiserver. In one run of each mode:

- the first creates of the mode's key objects (the ProvisioningRequest; each gated pod; Kueue's
  Job) are answered 503 as many times as the client tries, so try 1 fails past its retries and try
  2 runs;
- after that, every other distinct call (verb and resource) fails once: reads answered 503, writes
  (creates, patches, deletes) carried out by the apiserver with their answer cut (a reset), so the
  client's retry meets ``AlreadyExists``, ``NotFound`` or - for the JSON patch releasing a gate,
  whose ``test`` no longer holds - ``422 Invalid`` for a write that did happen; the watches' first
  attempt included.

The task must still succeed, every try recorded once with a typed reason and the step its history
calls for, no role of a gang created twice, nothing of a gang left (``tests.reliability.harness.
check`` with :class:`~tests.real.proxied.ProxyLedger`).
"""

from __future__ import annotations

import pytest

from tests.real.backends import RealBackend
from tests.real.fault_proxy import ANY, MUTATING_VERBS, READ_VERBS, FaultProxy, Rule
from tests.real.proxied import MODES, ProxyLedger, gang_operator, proxy, proxy_session  # noqa: F401
from tests.reliability.harness import QUICK_CLIENT, check, run_task

pytestmark = pytest.mark.timeout(400)
KEY_OBJECT = {"provisioning_request": "provisioningrequests", "gates": "pods", "kueue": "jobs"}
KEY_OBJECTS_CREATED_AT_ONCE = {"provisioning_request": 1, "gates": 2, "kueue": 1}
"""The gated pods are created concurrently: their attempts interleave, so the 503s must cover every
attempt of every member for one of them to fail past its retries."""


def every_call_fails_once(mode: str) -> list[Rule]:
    attempts = int(QUICK_CLIENT["retry_attempts"]) * KEY_OBJECTS_CREATED_AT_ONCE[mode]
    return [
        Rule(("create",), (KEY_OBJECT[mode],), 503, count=attempts),
        Rule(MUTATING_VERBS, (ANY,), "reset", each_call=True),
        Rule(READ_VERBS, (ANY,), 503, each_call=True),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_every_call_failing_once_breaks_no_invariant(proxy: FaultProxy, cluster: RealBackend, mode: str) -> None:  # noqa: F811
    proxy.set_rules(every_call_fails_once(mode))
    ledger = ProxyLedger(proxy, cluster.cluster.kubeconfig_path)
    try:
        run = run_task(gang_operator(mode), f"real_faults_{mode}")
        verdict = check(run, ledger, grace=60)
    finally:
        ledger.close()
    calls = proxy.calls()
    injected = {(call.verb, call.resource) for call in calls if call.injected}
    tries = [(record.attempt, record.outcome) for record in run.records]
    refused = [
        f"{call.target} {call.name} -> {call.code}: {call.request_body[:800]!r} answered {call.answer_body[:800]!r}"
        for call in calls
        if call.answer_body and call.code not in (404, 409)
    ]
    assert run.outcome == "success", (run.error, tries, refused)
    assert verdict.problems() == [], verdict.problems()
    assert tries[0][1] != "all_succeeded" and tries[-1][1] == "all_succeeded", tries
    assert ("create", KEY_OBJECT[mode]) in injected and any(verb == "watch" for verb, _ in injected), injected
    if mode == "gates":  # the release retried after its cut answer met the real server's 422, and went on
        assert any(call.target == "patch/pods" and call.code == 422 for call in calls), refused
    made = {(call.verb, call.resource) for call in calls if call.verb != "discovery"}
    assert made <= injected, f"calls that never failed: {sorted(made - injected)}"
