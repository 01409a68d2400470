"""What ``gang-sim real --scenario multikueue`` sets up, checked without starting it: the clusters'
scenarios and quotas, the manager's MultiKueue objects, and the one kubeconfig with a context each."""

from __future__ import annotations

import base64

import yaml

from gang_sim.testing import multikueue as wiring
from gang_sim.testing.real import multikueue as real


def test_worker_2_has_four_one_gpu_nodes_and_worker_1_none() -> None:
    gpus = {
        name: sum(pool.gpus_per_node * pool.initial_nodes for pool in real.scenario(name).node_pools)
        for name in real.SCENARIOS
    }
    assert gpus == {real.MANAGER: 0, real.WORKER_1: 0, real.WORKER_2: 4}
    assert "nvidia.com/gpu" not in real.QUOTAS[real.WORKER_1]
    assert real.QUOTAS[real.WORKER_2]["nvidia.com/gpu"] == "4"


def test_the_manager_objects_name_each_worker_and_its_kubeconfig_secret() -> None:
    objects = wiring.manager_objects({real.WORKER_1: b"one", real.WORKER_2: b"two"})
    kinds = [(item["kind"], item["metadata"]["name"]) for item in objects]
    assert kinds == [
        ("Secret", "worker-1-kubeconfig"),
        ("MultiKueueCluster", "worker-1"),
        ("Secret", "worker-2-kubeconfig"),
        ("MultiKueueCluster", "worker-2"),
        ("MultiKueueConfig", "multikueue"),
        ("AdmissionCheck", "multikueue"),
    ]
    assert base64.b64decode(objects[2]["data"]["kubeconfig"]) == b"two"
    assert objects[4]["spec"]["clusters"] == [real.WORKER_1, real.WORKER_2]
    assert objects[5]["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    queue, local = wiring.queue_objects(
        real.QUOTAS[real.MANAGER], queue="team", namespace="default", admission_check="multikueue"
    )
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    assert local["spec"] == {"clusterQueue": "cq-team"}


def test_one_kubeconfig_holds_a_context_per_cluster_the_managers_current(tmp_path) -> None:
    paths = {}
    for name in (real.MANAGER, real.WORKER_1, real.WORKER_2):
        single = {
            "clusters": [
                {"name": "gang-real", "cluster": {"server": f"https://{name}", "certificate-authority-data": "Q0E="}}
            ],
            "users": [{"name": "admin", "user": {"client-certificate-data": name}}],
        }
        paths[name] = tmp_path / f"{name}.kubeconfig"
        paths[name].write_text(yaml.safe_dump(single))
    document = real.combined_kubeconfig(paths)
    assert document["current-context"] == real.MANAGER
    assert [item["name"] for item in document["contexts"]] == [real.MANAGER, real.WORKER_1, real.WORKER_2]
    worker = next(item for item in document["clusters"] if item["name"] == real.WORKER_2)
    assert worker["cluster"]["server"] == "https://worker-2"
