"""kwok stages: what the fake kubelet does to pods, the ``sim.gang.dev/`` annotations read as in ``gang-sim``.

kwok's own stages (copied from its module by ``make real-cluster``: node-initialize, the lease
heartbeat, pod-create, the init-container stages and pod-delete) bring nodes up, give pods an IP and
finish deletions. This module adds ``node-hostname`` (:func:`node_hostname_stage`: a node without
``kubernetes.io/hostname`` gets its own name, before node-initialize makes it Ready) and the stages
that decide a gang member's life, so a pod means the same on both backends (``docs/emulator.md``,
"The ``sim.gang.dev/`` annotations"):

- ``gang-member-start``: ``Running`` and Ready ``sim.gang.dev/start-seconds`` (default 2) after its
  containers were created;
- ``gang-member-exit``: exits ``sim.gang.dev/run-seconds`` after it started, with every container's
  exit code ``sim.gang.dev/exit-code`` (default 0: ``Succeeded``, else ``Failed``) and its termination
  message ``sim.gang.dev/termination-message``; without ``run-seconds`` it runs until deleted;
- ``gang-member-stop``: a running pod being deleted stops as on SIGTERM, ``sim.gang.dev/stop-seconds``
  (default 0) after it was marked: ``Failed``, every container terminated with exit code 143 and the
  termination message ``sim.gang.dev/termination-message`` - what a kubelet writes before it deletes
  the pod (``pkg/kubelet/status/status_manager.go``). kwok's ``pod-delete`` then removes it within
  its grace period (its delay runs from 1 s to ``deletionTimestamp``). Both stages match a running
  pod being deleted and kwok picks one at random by weight, so this one weighs
  :data:`STOP_WEIGHT` against ``pod-delete``'s 1. Not modelled: SIGKILL at the end of the grace
  period (a ``stop-seconds`` past it still ends in exit code 143).

Stage format: kwok ``pkg/apis/v1alpha1/stage_types.go`` (selectors and delays are jq expressions over
the object; ``durationFrom`` strings are parsed by Go's ``time.ParseDuration``, so seconds get an
``s``; an empty jq result falls back to ``durationMilliseconds``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gang_sim.world.cloud import HOSTNAME_LABEL
from gang_sim.world.node_topology import BLOCK_LABEL, HOST_LABEL

ANNOTATION = "sim.gang.dev/"
_HOSTNAME_PATCH = (
    f"labels:\n  {HOSTNAME_LABEL}: {{{{ .metadata.name | Quote }}}}\n"
    f'{{{{- if index .metadata.labels "{BLOCK_LABEL}" }}}}\n'
    f"  {HOST_LABEL}: {{{{ .metadata.name | Quote }}}}\n"
    "{{- end }}\n"
)
"""The ``node-hostname`` patch, a Go template kwok renders over the node (``.metadata.labels`` a map:
``index`` of a missing label is empty)."""
_HOSTNAME = f'.metadata.labels["{HOSTNAME_LABEL}"]'
_NODE_INITIALIZE = "node-initialize"
_INITIALIZED = '.status.conditions.[] | select( .type == "Initialized" ) | .status'
KWOK_STAGE_FILES = (
    "node-initialize.yaml",
    "node-heartbeat-with-lease.yaml",
    "pod-create.yaml",
    "pod-init-container-running.yaml",
    "pod-init-container-completed.yaml",
    "pod-delete.yaml",
)


def _annotation(name: str) -> str:
    return f'.metadata.annotations["{ANNOTATION}{name}"]'


def _seconds_from(name: str) -> dict[str, Any]:
    return {"jq": {"expression": f'{_annotation(name)} // empty | . + "s"'}}


_START_STATUS = """\
{{ $now := Now }}
conditions:
- {type: Ready, status: "True", lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastProbeTime: null, lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _terminated_status(*, variables: str, exit_code: str, reason: str, phase: str, started_at: bool) -> str:
    """The status template of a pod whose every container terminated with ``exit_code`` and ``reason``
    (Go template expressions) and the termination message ``$message``, which ``variables`` sets;
    ``started_at``: the terminated state carries a ``startedAt`` too."""
    started = "      startedAt: {{ $now | Quote }}\n" if started_at else ""
    return (
        "{{ $now := Now }}\n"
        + variables
        + """\
conditions:
- {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
"""
        + f"      exitCode: {exit_code}\n"
        + f"      reason: {reason}\n"
        + "      message: {{ $message | Quote }}\n"
        + started
        + "      finishedAt: {{ $now | Quote }}\n"
        + "{{ end }}\n"
        + f"phase: {phase}\n"
    )


_EXIT_STATUS = _terminated_status(
    variables='{{ $code := or (index .metadata.annotations "sim.gang.dev/exit-code") "0" }}\n'
    '{{ $message := or (index .metadata.annotations "sim.gang.dev/termination-message") "" }}\n',
    exit_code="{{ $code }}",
    reason='{{ if eq $code "0" }}Completed{{ else }}Error{{ end }}',
    phase='{{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}',
    started_at=True,
)
"""``gang-member-exit``: every container exits with ``sim.gang.dev/exit-code`` (0: ``Succeeded``)."""
_STOP_STATUS = _terminated_status(
    variables='{{ $message := "" }}\n'
    '{{ with .metadata.annotations }}{{ $message = or (index . "sim.gang.dev/termination-message") "" }}{{ end }}\n',
    exit_code="143",
    reason="Error",
    phase="Failed",
    started_at=False,
)
"""``gang-member-stop``: every container stopped as on SIGTERM (128 + 15), annotations or none."""
STOP_WEIGHT = 1_000_000_000
"""``gang-member-stop``'s weight: kwok takes ``pod-delete`` (weight 1) for a running pod being deleted
once in a billion."""


def _stage(
    name: str, expressions: list[dict[str, Any]], delay: dict[str, Any], status: str, weight: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": expressions},
        "delay": delay,
        "next": {"statusTemplate": status},
    }
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def node_hostname_stage() -> dict[str, Any]:
    """``kubernetes.io/hostname: <the node's name>`` on a node that has no such label, and on a node
    of a pool with a GKE ``topology`` (it has ``cloud.google.com/gce-topology-block``) also
    ``cloud.google.com/gce-topology-host: <its name>``, as gang-sim labels its nodes
    (:mod:`gang_sim.world.node_topology`: one VM per host).

    A kubelet labels its node with its hostname (``pkg/kubelet/kubelet_node_status.go``,
    ``initialNode``); kwok does not, and the nodes the cluster-autoscaler's kwok provider adds are
    copies of a template (:func:`gang_sim.testing.real.nodes.autoscaler_templates`), so without this
    every added node of a pool would share one hostname, and topology spread or affinity on
    ``kubernetes.io/hostname`` would see one domain where there are many. A metadata patch (kwok
    ``StagePatch``, ``root: metadata``, a strategic merge for a Node).
    """
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "node-hostname"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Node"},
            "selector": {"matchExpressions": [{"key": _HOSTNAME, "operator": "DoesNotExist"}]},
            "next": {"patches": [{"root": "metadata", "template": _HOSTNAME_PATCH}]},
        },
    }


def _after_hostname(stage: dict[str, Any]) -> dict[str, Any]:
    """kwok's node-initialize only once the node has its hostname: a node is Ready with its labels."""
    if stage.get("metadata", {}).get("name") != _NODE_INITIALIZE:
        return stage
    expressions = stage["spec"]["selector"]["matchExpressions"]
    return {
        **stage,
        "spec": {
            **stage["spec"],
            "selector": {
                **stage["spec"]["selector"],
                "matchExpressions": [*expressions, {"key": _HOSTNAME, "operator": "Exists"}],
            },
        },
    }


def gang_member_stages() -> list[dict[str, Any]]:
    """The stages of a member's life (start, exit, stop when deleted), after ``gang-sim``'s simulated kubelet."""
    not_deleted = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    start = _stage(
        "gang-member-start",
        [
            not_deleted,
            {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
            {"key": _INITIALIZED, "operator": "In", "values": ["True"]},
            {"key": ".status.containerStatuses.[].state.running.startedAt", "operator": "DoesNotExist"},
        ],
        {"durationMilliseconds": 2000, "durationFrom": _seconds_from("start-seconds")},
        _START_STATUS,
    )
    exit_ = _stage(
        "gang-member-exit",
        [
            not_deleted,
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": _annotation("run-seconds"), "operator": "Exists"},
        ],
        {"durationMilliseconds": 0, "durationFrom": _seconds_from("run-seconds")},
        _EXIT_STATUS,
    )
    stop = _stage(
        "gang-member-stop",
        [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
        ],
        {"durationMilliseconds": 0, "durationFrom": _seconds_from("stop-seconds")},
        _STOP_STATUS,
        weight=STOP_WEIGHT,
    )
    return [start, exit_, stop]


def write_configuration(manifests: Path, target: Path) -> Path:
    """kwok's ``--config`` file: its own stages from ``manifests/kwok`` (node-initialize after
    node-hostname), node-hostname and the gang member stages."""
    documents: list[Any] = []
    for name in KWOK_STAGE_FILES:
        documents.extend(
            _after_hostname(stage) for stage in yaml.safe_load_all((manifests / "kwok" / name).read_text()) if stage
        )
    documents.append(node_hostname_stage())
    documents.extend(gang_member_stages())
    target.write_text(yaml.safe_dump_all([document for document in documents if document], sort_keys=False))
    return target
