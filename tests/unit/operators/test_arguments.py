"""Bad operator arguments: each case is rejected at parse time (``__init__``) or render time, with a
message naming the argument, and nothing is created (no cluster is configured in these tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.operators import GangTrainingOperator
from airflow_provider_gang.reservation.fallback import LoosenTopology, OtherZone, RetryAsIs
from airflow_provider_gang.reservation.tries.arguments import GangArgumentError

RACK, BLOCK = "cloud.google.com/gce-topology-subblock", "cloud.google.com/gce-topology-block"
GOOD: dict[str, Any] = {"task_id": "train", "image": "trainer:1", "size": 4, "gpus": 1}

# (id, arguments replacing GOOD's, argument named in the error)
PARSE_TIME_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("size-zero", {"size": 0}, "size"),
    ("size-not-int", {"size": "8"}, "size"),
    ("size-bool", {"size": True}, "size"),
    ("min-size-above-size", {"min_size": 5}, "min_size"),
    ("min-size-zero", {"min_size": 0}, "min_size"),
    ("gpus-negative", {"gpus": -1}, "gpus"),
    ("cpu-not-quantity", {"cpu": "four"}, "cpu"),
    ("memory-not-quantity", {"memory": "16 GB"}, "memory"),
    ("no-pod-source", {"image": None}, "image"),
    ("image-and-template", {"pod_template": {"spec": {"containers": [{"name": "a", "image": "b"}]}}}, "pod_template"),
    ("template-without-containers", {"image": None, "pod_template": {"spec": {}}}, "pod_template.spec.containers"),
    (
        "template-restart-always",
        {
            "image": None,
            "pod_template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "a", "image": "b"}]}},
        },
        "pod_template.spec.restartPolicy",
    ),
    ("template-file-missing", {"image": None, "pod_template_file": "/nonexistent/pod.yaml"}, "pod_template_file"),
    ("command-is-string", {"command": "python train.py"}, "command"),
    ("args-not-strings", {"args": ["--epochs", 3]}, "args"),
    ("env-not-mapping", {"env": ["A=1"]}, "env"),
    ("env-bad-name", {"env": {"1BAD": "x"}}, "env"),
    ("env-non-string-value", {"env": {"EPOCHS": 3}}, "env"),
    ("env-overrides-rank", {"distributed": "torch", "env": {"RANK": "0"}}, "env"),
    ("env-overrides-gang-rank", {"env": {"GANG_RANK": "0"}}, "env"),
    ("env-overrides-gang-size", {"env": {"GANG_SIZE": "4"}}, "env"),
    ("env-overrides-gang-name", {"env": {"GANG_NAME": "mine"}}, "env"),
    ("env-overrides-gang-original-size", {"env": {"GANG_ORIGINAL_SIZE": "4"}}, "env"),
    ("env-claims-a-resume", {"env": {"GANG_RESUME": "1"}}, "env"),
    ("env-claims-a-resume-step", {"env": {"GANG_RESUME_STEP": "10"}}, "env"),
    ("env-overrides-checkpoint-dir", {"checkpoint": "/ckpt/{{ run_id }}", "env": {"GANG_CHECKPOINT_DIR": "/x"}}, "env"),
    ("env-overrides-try-number", {"env": {"GANG_TRY_NUMBER": "1"}}, "env"),
    ("env-overrides-message-path", {"env": {"GANG_TERMINATION_MESSAGE_PATH": "/x"}}, "env"),
    ("distributed-unknown", {"distributed": "mpi"}, "distributed"),
    ("master-port-out-of-range", {"distributed": "torch", "master_port": 70000}, "master_port"),
    ("reservation-unknown", {"reservation": "volcano"}, "reservation"),
    ("kueue-without-queue", {"reservation": "kueue"}, "kueue_queue"),
    ("queue-outside-kueue", {"kueue_queue": "team-a"}, "kueue_queue"),
    (
        "class-with-kueue",
        {"reservation": "kueue", "kueue_queue": "team-a", "provisioning_class": "queued-provisioning.gke.io"},
        "provisioning_class",
    ),
    ("class-unknown", {"provisioning_class": "fast-please"}, "provisioning_class"),
    (
        "parameters-not-for-class",
        {"provisioning_parameters": {"maxRunDurationSeconds": "60"}},
        "provisioning_parameters['maxRunDurationSeconds']",
    ),
    ("strict-zone-without-zone", {"strict_zone": True}, "strict_zone"),
    ("zone-not-label-value", {"zone": "us central"}, "zone"),
    ("namespace-not-dns", {"namespace": "ML_Team"}, "namespace"),
    ("label-reserved-prefix", {"labels": {"airflow-gang.io/gang": "x"}}, "labels['airflow-gang.io/gang']"),
    ("reservation-timeout-negative-seconds", {"reservation_timeout": -600}, "reservation_timeout"),
    ("startup-timeout-bool", {"startup_timeout": True}, "startup_timeout"),
    ("fallbacks-a-single-step", {"fallbacks": OtherZone("us-central1-b")}, "fallbacks"),
    ("fallbacks-zone-names", {"fallbacks": ["us-central1-b"]}, "fallbacks"),
    ("fallbacks-a-string", {"fallbacks": "us-central1-b"}, "fallbacks"),
    ("applies-to-a-string", {"retries": 1, "fallbacks": [RetryAsIs(applies_to="capacity_revoked")]}, "fallbacks"),
    ("applies-to-unknown-reason", {"retries": 1, "fallbacks": [RetryAsIs(applies_to={"gremlins"})]}, "fallbacks"),
    ("client-options-unknown-key", {"client_options": {"retries": 3}}, "client_options"),
    ("client-options-zero-attempts", {"client_options": {"retry_attempts": 0}}, "client_options"),
    ("reservation-timeout-zero", {"reservation_timeout": timedelta(0)}, "reservation_timeout"),
    ("startup-timeout-negative", {"startup_timeout": timedelta(seconds=-5)}, "startup_timeout"),
    ("run-timeout-string", {"run_timeout": "6h"}, "run_timeout"),
    ("start-by-negative", {"start_by": timedelta(hours=-1)}, "start_by"),
    ("on-finish-unknown", {"on_finish": "archive"}, "on_finish"),
    ("log-ranks-out-of-range", {"log_ranks": [0, 4]}, "log_ranks"),
    ("log-ranks-string", {"log_ranks": "0"}, "log_ranks"),
    ("deferrable-string", {"deferrable": "yes"}, "deferrable"),
    ("retry-on-exit-codes-a-string", {"retry_on_exit_codes": "137"}, "retry_on_exit_codes"),
    ("fail-on-exit-codes-zero", {"fail_on_exit_codes": [0]}, "fail_on_exit_codes"),
    ("fail-on-exit-codes-over-255", {"fail_on_exit_codes": [300]}, "fail_on_exit_codes"),
    ("exit-code-in-both-lists", {"retry_on_exit_codes": [1, 137], "fail_on_exit_codes": [1]}, "fail_on_exit_codes"),
    ("use-reservation-not-a-name", {"use_reservation": "A100 reservation"}, "use_reservation"),
    ("use-reservation-with-spot", {"use_reservation": "a100-res", "spot": True}, "use_reservation"),
    ("cloud-unknown", {"cloud": "azure"}, "cloud"),
    ("cloud-not-a-profile", {"cloud": {"name": "mine"}}, "cloud"),
    ("use-reservation-on-eks", {"cloud": "eks", "use_reservation": "a100-res"}, "use_reservation"),
    ("use-reservation-on-karpenter", {"cloud": "karpenter", "use_reservation": "a100-res"}, "use_reservation"),
    ("use-reservation-on-aks", {"cloud": "aks", "use_reservation": "a100-res"}, "use_reservation"),
    ("conn-id-empty", {"kubernetes_conn_id": ""}, "kubernetes_conn_id"),
    ("topology-required-and-preferred", {"required_topology": RACK, "preferred_topology": BLOCK}, "preferred_topology"),
    ("topology-not-a-label-key", {"required_topology": "a rack"}, "required_topology"),
    ("topology-empty", {"preferred_topology": ""}, "preferred_topology"),
    ("preferred-topology-with-workload", {"reservation": "workload", "preferred_topology": RACK}, "preferred_topology"),
    ("preferred-topology-with-auto", {"reservation": "auto", "preferred_topology": RACK}, "preferred_topology"),
    ("loosen-without-topology", {"retries": 1, "fallbacks": [LoosenTopology(BLOCK)]}, "fallbacks"),
    (
        "loosen-to-a-preference-in-workload",
        {
            "reservation": "workload",
            "required_topology": RACK,
            "retries": 1,
            "fallbacks": [LoosenTopology(BLOCK, preferred=True)],
        },
        "fallbacks",
    ),
    ("static-error-beside-templated-namespace", {"namespace": "{{ params.ns }}", "min_size": 9}, "min_size"),
    (
        "static-error-beside-templated-file",
        {"image": None, "pod_template_file": "{{ params.pod }}", "gpus": -2},
        "gpus",
    ),
]


@pytest.mark.parametrize(("overrides", "argument"), [pytest.param(o, a, id=i) for i, o, a in PARSE_TIME_CASES])
def test_rejected_at_parse_time_naming_the_argument(overrides: dict[str, Any], argument: str) -> None:
    with pytest.raises(GangArgumentError) as caught:
        GangTrainingOperator(**{**GOOD, **overrides})
    assert caught.value.argument == argument
    assert f"argument {argument!r}" in str(caught.value)


def test_the_table_has_at_least_25_cases() -> None:
    assert len(PARSE_TIME_CASES) + len(RENDER_TIME_CASES) >= 25


def test_good_arguments_are_accepted() -> None:
    operator = GangTrainingOperator(**GOOD)
    assert operator.size == 4
    assert operator.build_spec("train-t1-abc").size == 4


def test_pod_template_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nspec:\n  containers:\n  - name: trainer\n    image: trainer:2\n")
    operator = GangTrainingOperator(task_id="t", size=2, pod_template_file=str(path), args=["--x"])
    container = operator.build_spec("train-t1-abc").pod_template["spec"]["containers"][0]
    assert container["image"] == "trainer:2"
    assert container["args"] == ["--x"]


# Values that hold Jinja are judged after rendering: (id, arguments, rendered values, argument named)
RENDER_TIME_CASES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("namespace-renders-invalid", {"namespace": "{{ params.ns }}"}, {"namespace": "Bad_NS"}, "namespace"),
    (
        "queue-renders-invalid",
        {"reservation": "kueue", "kueue_queue": "{{ params.queue }}"},
        {"kueue_queue": "no spaces!"},
        "kueue_queue",
    ),
    ("zone-renders-invalid", {"zone": "{{ params.zone }}"}, {"zone": "a b"}, "zone"),
    ("env-renders-rank", {"distributed": "torch", "env": "{{ params.env }}"}, {"env": {"WORLD_SIZE": "9"}}, "env"),
    ("command-renders-string", {"command": "{{ params.cmd }}"}, {"command": "python train.py"}, "command"),
    ("image-renders-empty", {"image": "{{ params.image }}"}, {"image": ""}, "image"),
]


@pytest.mark.parametrize(
    ("overrides", "rendered", "argument"), [pytest.param(o, r, a, id=i) for i, o, r, a in RENDER_TIME_CASES]
)
def test_templated_values_are_checked_after_rendering(
    overrides: dict[str, Any], rendered: dict[str, Any], argument: str
) -> None:
    operator = GangTrainingOperator(**{**GOOD, **overrides})  # parse time: Jinja is not judged
    for name, value in rendered.items():
        setattr(operator, name, value)  # what render_template_fields leaves behind
    with pytest.raises(GangArgumentError) as caught:
        operator.check_arguments(rendered=True)
    assert caught.value.argument == argument


@pytest.mark.parametrize("configured", ["True", "False"])
def test_deferrable_default_follows_airflow_configuration(configured: str) -> None:
    """The default is read from ``[operators] default_deferrable`` when the DAG file is parsed."""
    program = (
        "from airflow_provider_gang.operators import GangTrainingOperator as Op; "
        "print(Op(task_id='t', image='i', size=1).deferrable)"
    )
    environment = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": configured}
    result = subprocess.run(
        [sys.executable, "-c", program], env=environment, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == configured


def test_every_provider_variable_is_refused_in_env() -> None:
    """The refused names are the ones the manifests actually write: a member of a torch gang with a
    resuming checkpoint gets every ``GANG_*`` variable, and each of them is refused in ``env``."""
    from airflow_provider_gang.reservation import checkpoint
    from airflow_provider_gang.reservation.manifests import rank_env
    from airflow_provider_gang.reservation.spec import GangSpec

    spec = GangSpec(
        name="g",
        namespace="default",
        size=2,
        pod_template={"spec": {"containers": [{"name": "main", "image": "i"}]}},
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        checkpoint=checkpoint.Checkpoint(location="/ckpt", try_number=2, resume_step=10),
    )
    written = {entry["name"] for entry in rank_env.rank_environment(spec, 0) if entry["name"].startswith("GANG_")}
    assert written == rank_env.PROVIDER_VARIABLES
    for name in sorted(written):
        with pytest.raises(GangArgumentError, match=name):
            GangTrainingOperator(**{**GOOD, "env": {name: "1"}})


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"cloud": "karpenter"}, "karpenter", id="named"),
        pytest.param({}, "gke", id="absent"),
        pytest.param(
            {"cloud": {"name": "mine", "spot_label": "example.com/spot", "spot_value": "1"}}, "mine", id="mapping"
        ),
    ],
)
def test_the_connection_extra_chooses_the_cloud_unless_the_argument_does(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any], expected: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_KUBE_CLOUD", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    operator = GangTrainingOperator(**GOOD, kubernetes_conn_id="kube_cloud")
    settings = operator.try_settings()
    assert settings.argument_error is None and settings.configured is not None
    assert settings.configured.cloud.name == expected
    argued = GangTrainingOperator(**{**GOOD, "task_id": "argued"}, kubernetes_conn_id="kube_cloud", cloud="aks")
    assert argued.try_settings().configured.cloud.name == "aks"  # type: ignore[union-attr]


def test_a_malformed_connection_extra_ends_the_try_before_anything_is_created(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"cloud": "azure"}
    monkeypatch.setenv("AIRFLOW_CONN_KUBE_AZURE", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    settings = GangTrainingOperator(**GOOD, kubernetes_conn_id="kube_azure").try_settings()
    assert settings.configured is None and settings.argument_error is not None
    assert settings.argument_error.argument == "cloud"
    assert "connection 'kube_azure' extra 'cloud': 'azure' is no cloud profile" in str(settings.argument_error)


def test_a_missing_connection_leaves_the_default_cloud_to_fail_on_the_connection_itself() -> None:
    settings = GangTrainingOperator(**GOOD, kubernetes_conn_id="no_such_connection").try_settings()
    assert settings.configured is not None and settings.configured.cloud.name == "gke"
