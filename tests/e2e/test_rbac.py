"""``deploy/rbac.yaml`` is exactly minimal: per reservation mode its Role (and for kueue its ClusterRole,
for the cluster-scoped ClusterQueue and AdmissionChecks) is what the precheck asks for, a gang runs (and is adopted and
killed) with nothing more and uses every rule, and each single rule removed is refused by the precheck,
by name, before anything is created.

Rules are read from the YAML and given to the emulator as one ``gang_sim.apiserver.http.auth.Rule`` per (verb, API
group, resource) triple - RBAC's own model (https://kubernetes.io/docs/reference/access-authn-authz/rbac/).
The emulator's rules are not namespaced; every gang here runs in the Role's namespace ``default``. The
emulator does not serve ``rbac.authorization.k8s.io``, so the objects are checked against the
Kubernetes OpenAPI models of the official ``kubernetes`` client instead of being applied.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import kubernetes.client.models as k8s_models
import pytest
import yaml

from airflow_provider_gang.hooks.precheck import permissions_needed
from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.operators.failures import GangFailedForGood
from airflow_provider_gang.reservation.naming import GANG_LABEL, gang_name
from airflow_provider_gang.reservation.phases import Reason
from airflow_provider_gang.reservation.spec import ReservationMode
from gang_sim.apiserver.http.auth import Rule
from gang_sim.testing import ClusterHarness
from gang_sim.testing.eventually import eventually
from gang_sim.world.scenario import load_scenario
from tests.e2e.driving import FakeTaskInstance, context_for, deferred, first_event
from tests.e2e.gang_dags import simulated_pod
from tests.e2e.test_kill_and_adopt import on_kill_with_state
from tests.e2e.test_modes import kueue_queues

RBAC_FILE = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
MODE_LABEL = "airflow-gang.io/reservation-mode"
RBAC_API = "rbac.authorization.k8s.io"
ROLE_KINDS = ("Role", "ClusterRole")
MODES = [mode.value for mode in ReservationMode]
GANG_KINDS = (
    "v1/configmaps",
    "v1/pods",
    "v1/podtemplates",
    "v1/services",
    "batch/v1/jobs",
    "autoscaling.x-k8s.io/v1/provisioningrequests",
    "scheduling.k8s.io/v1beta1/podgroups",
)
QUEUE = "team"


@dataclass(frozen=True, order=True)
class Grant:
    """One (verb, API group, resource) triple an RBAC rule grants; ``resource`` may be ``pods/log``."""

    verb: str
    group: str
    resource: str

    def __str__(self) -> str:
        """As the precheck names it: ``get pods/log``, ``list jobs.batch``."""
        return f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")

    @property
    def metric(self) -> tuple[str, str]:
        """As the emulator's ``/_sim/metrics`` counts a request: ``("list", "jobs.batch")``."""
        return self.verb, self.resource + (f".{self.group}" if self.group else "")


def documents() -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(RBAC_FILE.read_text()) if document is not None]


def roles_of(mode: str, kinds: tuple[str, ...] = ROLE_KINDS) -> list[dict[str, Any]]:
    """The mode's Role and ClusterRole (only those of ``kinds``)."""
    return [
        document
        for document in documents()
        if document["kind"] in kinds and document["metadata"]["labels"].get(MODE_LABEL) == mode
    ]


def grants_of(mode: str, kinds: tuple[str, ...] = ROLE_KINDS) -> frozenset[Grant]:
    """Every triple the mode's Role and ClusterRole (of ``kinds``) grant; wildcards, ``resourceNames`` and
    ``nonResourceURLs`` are refused (a minimal Role names every verb and resource, and the emulator could
    not check them)."""
    found: set[Grant] = set()
    for rule in [rule for role in roles_of(mode, kinds) for rule in role["rules"]]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        for verb in rule["verbs"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert "*" not in (verb, group, resource), rule
                    grant = Grant(verb, group, resource)
                    assert grant not in found, f"{grant} granted twice"
                    found.add(grant)
    return frozenset(found)


def rules(grants: frozenset[Grant]) -> list[Rule]:
    return [Rule((grant.verb,), (grant.group,), (grant.resource,)) for grant in sorted(grants)]


def connect_as(
    cluster: ClusterHarness, monkeypatch: pytest.MonkeyPatch, conn_id: str, grants: frozenset[Grant]
) -> None:
    """A user holding exactly ``grants``, and the Airflow connection ``conn_id`` pointing at its
    kubeconfig (as ``demo.simulated_cluster`` does for the admin's)."""
    _, kubeconfig = cluster.add_user(conn_id, rules(grants))
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}),
    )


def gang_arguments(mode: str, conn_id: str) -> dict[str, Any]:
    """A distributed gang (it has a headless Service, so it needs every rule of its mode) of two
    members that run 20 simulated seconds."""
    return {
        "size": 2,
        "gpus": 1,
        "pod_template": simulated_pod(20),
        "distributed": "torch",
        "reservation": mode,
        "kueue_queue": QUEUE if mode == "kueue" else None,
        "deferrable": True,
        "kubernetes_conn_id": conn_id,
        "reservation_timeout": timedelta(seconds=60),
        "startup_timeout": timedelta(seconds=30),
    }


def start_cluster(cluster_factory: Any, mode: str, time_scale: float | None) -> ClusterHarness:
    scenario = load_scenario("small")
    if mode == "workload":  # no ProvisioningRequest scales the GPU pool up: the gang's nodes are there
        pools = tuple(replace(pool, initial_nodes=2) if pool.gpus_per_node else pool for pool in scenario.node_pools)
        scenario = replace(scenario, node_pools=pools)
    cluster: ClusterHarness = cluster_factory(scenario, time_scale=time_scale)
    if mode == "kueue":
        kueue_queues(cluster, {QUEUE: 4})
    return cluster


def leftovers(cluster: ClusterHarness) -> dict[str, list[str]]:
    """Names of every object carrying the gang label, by kind (read straight from the store)."""
    found = {
        kind: [item["metadata"]["name"] for item in cluster.objects(kind, label_selector=GANG_LABEL)]
        for kind in GANG_KINDS
    }
    return {kind: names for kind, names in found.items() if names}


# -- the file itself ----------------------------------------------------------------------------------


def _check_model(value: Any, type_name: str, where: str) -> None:
    """``value`` (decoded YAML) fits the client's model ``type_name``: no unknown field (a typo such as
    ``apiGroup`` in a rule would be silently dropped by a lenient apply), required fields present."""
    if type_name.startswith("list["):
        assert isinstance(value, list), f"{where}: expected a list"
        for index, item in enumerate(value):
            _check_model(item, type_name[5:-1], f"{where}[{index}]")
        return
    if type_name.startswith(("dict(", "dict[")):
        assert isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), f"{where}: map"
        return
    if type_name == "str":
        assert isinstance(value, str), f"{where}: expected a string"
        return
    model = getattr(k8s_models, type_name)
    attribute_of = {json_name: attribute for attribute, json_name in model.attribute_map.items()}
    assert isinstance(value, dict), f"{where}: expected an object"
    unknown = set(value) - set(attribute_of)
    assert not unknown, f"{where}: fields unknown to {type_name}: {sorted(unknown)}"
    for key, item in value.items():
        _check_model(item, model.openapi_types[attribute_of[key]], f"{where}.{key}")
    model(**{attribute_of[key]: item for key, item in value.items()})  # ValueError if a required field is missing


def test_rbac_yaml_is_a_role_and_binding_per_mode_and_a_cluster_role_for_kueue_of_valid_rbac_v1_objects() -> None:
    docs = documents()
    assert {(doc["apiVersion"], doc["kind"]) for doc in docs} == {
        (f"{RBAC_API}/v1", kind) for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    }
    for index, doc in enumerate(docs):
        _check_model(doc, f"V1{doc['kind']}", f"document {index} ({doc['kind']})")
    docs = [doc for doc in docs if MODE_LABEL in doc["metadata"]["labels"]]  # the topology ones: below
    for mode in MODES:
        name = f"airflow-gang-{mode.replace('_', '-')}"
        scopes: list[tuple[str, dict[str, str]]] = [("Role", {"namespace": "default"})]
        if (
            mode == "kueue"
        ):  # the only mode that reads a cluster-scoped kind (the LocalQueue's ClusterQueue and its AdmissionChecks)
            scopes.append(("ClusterRole", {}))
        for kind, namespace in scopes:
            (role,) = [doc for doc in docs if doc["kind"] == kind and doc["metadata"]["labels"][MODE_LABEL] == mode]
            (binding,) = [
                doc for doc in docs if doc["kind"] == f"{kind}Binding" and doc["metadata"]["labels"][MODE_LABEL] == mode
            ]
            assert role["metadata"] == {"name": name, **namespace, "labels": {MODE_LABEL: mode}}
            assert binding["metadata"] == {"name": name, **namespace, "labels": {MODE_LABEL: mode}}
            assert binding["roleRef"] == {"apiGroup": RBAC_API, "kind": kind, "name": name}
            assert binding["subjects"] == [  # the Helm chart's worker and triggerer (docs/deploying.md)
                {"kind": "ServiceAccount", "name": "airflow-worker", "namespace": "airflow"},
                {"kind": "ServiceAccount", "name": "airflow-triggerer", "namespace": "airflow"},
            ]
    assert len(docs) == 2 * len(MODES) + 2


def test_model_check_refuses_a_misspelled_field() -> None:
    """The structural check above can fail: ``apiGroup`` (singular) is not a PolicyRule field."""
    role = {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "Role",
        "metadata": {"name": "r"},
        "rules": [{"apiGroup": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    with pytest.raises(AssertionError, match="apiGroup"):
        _check_model(role, "V1Role", "role")
    with pytest.raises(ValueError, match="verbs"):
        _check_model({**role, "rules": [{"apiGroups": [""], "resources": ["pods"]}]}, "V1Role", "role")


@pytest.mark.parametrize("mode", MODES)
def test_role_grants_exactly_what_the_precheck_asks_for(mode: str) -> None:
    """The Role the namespaced permissions, the ClusterRole the cluster-wide ones (kueue: get clusterqueues and
    admissionchecks)."""
    spec = GangTrainingOperator(task_id="train", **gang_arguments(mode, "unused")).build_spec("g")
    asked = {
        kind: {
            Grant(need.verb, need.resource.group, need.rbac_resource)
            for need in permissions_needed(spec)
            if need.cluster_scoped is (kind == "ClusterRole")
        }
        for kind in ROLE_KINDS
    }
    assert grants_of(mode, ("Role",)) == asked["Role"]
    assert grants_of(mode, ("ClusterRole",)) == asked["ClusterRole"]
    cluster_wide = {Grant("get", "kueue.x-k8s.io", "clusterqueues"), Grant("get", "kueue.x-k8s.io", "admissionchecks")}
    assert asked["ClusterRole"] == (cluster_wide if mode == "kueue" else set())


# -- a gang with exactly these rules ------------------------------------------------------------------


def first_event_advancing(cluster: ClusterHarness, trigger: Any, seconds: float) -> dict[str, Any]:
    """``first_event(trigger)`` while the manual clock moves ``seconds`` once the trigger watches all
    it watches (its WATCH requests counted by the emulator), so it sees the change through its watches
    as in a real wait. A trigger that decides from its first LIST (nothing to wait for) returns before;
    the clock then moves after it."""
    metrics = cluster.emulator.metrics  # type: ignore[union-attr]
    opened, wanted = metrics.total("watch"), len(trigger.objects.watches())
    returned, advanced = threading.Event(), threading.Event()

    def advance_once_watching() -> None:
        while not returned.wait(0.01):
            if metrics.total("watch") >= opened + wanted:
                cluster.advance(seconds)
                advanced.set()
                return

    mover = threading.Thread(target=advance_once_watching, name="advance-when-watching")
    mover.start()
    try:
        return first_event(trigger)
    finally:
        returned.set()
        mover.join()
        if not advanced.is_set():
            cluster.advance(seconds)


@pytest.mark.parametrize("mode", MODES)
def test_gang_runs_is_adopted_and_killed_with_exactly_the_role(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A gang whose first try's worker died is adopted by try 2, launched by two workers (members
    adopted) and succeeds; another gang is killed by its trigger's ``on_kill``; nothing is left; (kueue) a
    third names a LocalQueue that does not exist and is refused, naming those that do. Together they make
    every request of the mode: the requests made are exactly the Role's (and ClusterRole's) rules, none
    refused.

    The cluster runs on a manual clock, so each step happens when the test says (no race with members
    finishing early on a loaded machine)."""
    cluster = start_cluster(cluster_factory, mode, time_scale=None)
    conn_id = f"rbac_{mode}"
    granted = grants_of(mode)
    connect_as(cluster, monkeypatch, conn_id, granted)
    metrics = cluster.emulator.metrics  # type: ignore[union-attr]
    metrics.reset()
    op = GangTrainingOperator(task_id="train", **gang_arguments(mode, conn_id))

    deferred(op.execute, context_for(FakeTaskInstance(f"rbac_run_{mode}", "run-1", try_number=1)))  # then dies
    context: Any = context_for(FakeTaskInstance(f"rbac_run_{mode}", "run-1", try_number=2))
    reservation = deferred(op.execute, context)  # adopts every object of try 1
    event = first_event_advancing(cluster, reservation, 70)  # nodes provisioned (60 s); Kueue's members run
    assert event["status"] == "success", event
    deferred(op.execute_reserved, context, event)
    run = deferred(op.execute_reserved, context, event)  # a second worker: it adopts the members
    summary = op.execute_finished(context, first_event_advancing(cluster, run, 60))  # members ran their 20 s
    assert (summary["size_run"], summary["exit_codes"]) == (2, {"0": 0, "1": 0})
    assert leftovers(cluster) == {}

    killed = deferred(op.execute, context_for(FakeTaskInstance(f"rbac_kill_{mode}", "run-1")))
    on_kill_with_state(killed, "failed")
    eventually(lambda: leftovers(cluster) == {}, timeout=30.0, what="nothing left of the gang")

    if mode == "kueue":
        no_queue = GangTrainingOperator(task_id="train", **{**gang_arguments(mode, conn_id), "kueue_queue": "absent"})
        no_queue_context: Any = context_for(FakeTaskInstance(f"rbac_no_queue_{mode}", "run-1"))
        with pytest.raises(GangFailedForGood, match=f"LocalQueues there: {QUEUE}\\)"):
            no_queue.execute(no_queue_context)

    snapshot = metrics.snapshot()
    assert "403" not in snapshot["codes"], snapshot
    used = {
        (verb, resource)
        for verb, by_resource in snapshot["requests"].items()
        for resource in by_resource
        if resource != "selfsubjectaccessreviews.authorization.k8s.io"
    }
    # A workload gang's members bind as they are created (its nodes are there), so a trigger may decide
    # from its first LISTs before its watches open; tests/e2e/test_workload_api.py waits on them.
    racing = {("watch", "podgroups.scheduling.k8s.io"), ("watch", "pods")} if mode == "workload" else set()
    # Only on a Kueue MultiKueue manager does a try read the ClusterQueue's AdmissionChecks (the
    # precheck reads those it names; this one names none) and watch the Job (the run trigger follows
    # the worker's status mirrored there): tests/e2e/test_multikueue.py runs a gang with exactly this
    # Role there, and the test below refuses each rule's removal.
    unread = {("get", "admissionchecks.kueue.x-k8s.io"), ("watch", "jobs.batch")} if mode == "kueue" else set()
    assert used - racing == {grant.metric for grant in granted} - racing - unread


@pytest.mark.parametrize("mode", MODES)
def test_each_rule_removed_is_refused_by_the_precheck_by_name(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    cluster = start_cluster(cluster_factory, mode, time_scale=None)  # nothing needs to move
    granted = grants_of(mode)
    cluster_wide = grants_of(mode, ("ClusterRole",))
    for index, removed in enumerate(sorted(granted)):
        conn_id = f"rbac_{mode}_without_{index}"
        connect_as(cluster, monkeypatch, conn_id, granted - {removed})
        op = GangTrainingOperator(task_id="train", **gang_arguments(mode, conn_id))
        context: Any = context_for(FakeTaskInstance(f"rbac_without_{mode}_{index}", "run-1"))
        with pytest.raises(GangFailedForGood) as refused:
            op.execute(context)
        message = str(refused.value)
        assert refused.value.reason is Reason.INVALID, message
        scope = "cluster-wide permission: " if removed in cluster_wide else "permission in namespace 'default': "
        assert f"missing {scope}" in message, message
        assert f"{removed} (" in message, message
        assert [str(other) for other in granted if f"{other} (" in message] == [str(removed)], message
        assert leftovers(cluster) == {}, f"{removed} removed: {message}"


def test_a_watch_granted_only_through_resource_names_is_refused_naming_the_rule_to_add(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mode's Role with ``watch provisioningrequests`` narrowed to the try's own object name
    (``resourceNames``): RBAC authorizes the gang's watch of the collection by label selector with
    no name, so it would fail mid-wait; the precheck refuses it first, names ``resourceNames`` and the
    rule to add, and nothing is created."""
    mode = "provisioning_request"
    cluster = start_cluster(cluster_factory, mode, time_scale=None)
    watch = Grant("watch", "autoscaling.x-k8s.io", "provisioningrequests")
    granted = grants_of(mode)
    assert watch in granted
    ti = FakeTaskInstance("rbac_named_watch", "run-1")
    gang = gang_name(ti.dag_id, ti.task_id, ti.run_id, attempt=ti.try_number)
    narrowed = Rule(("watch",), ("autoscaling.x-k8s.io",), ("provisioningrequests",), names=(gang,))
    conn_id = "rbac_named_watch"
    _, kubeconfig = cluster.add_user(conn_id, [*rules(granted - {watch}), narrowed])
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}),
    )
    op = GangTrainingOperator(task_id="train", **gang_arguments(mode, conn_id))
    with pytest.raises(GangFailedForGood) as refused:
        op.execute(context_for(ti))
    message = str(refused.value)
    assert refused.value.reason is Reason.INVALID, message
    assert "watch provisioningrequests.autoscaling.x-k8s.io (" in message, message
    assert "only through resourceNames" in message, message
    rule = "{apiGroups: ['autoscaling.x-k8s.io'], resources: ['provisioningrequests'], verbs: ['watch']}"
    assert rule in message, message
    assert "missing permission" not in message, message
    assert leftovers(cluster) == {}
