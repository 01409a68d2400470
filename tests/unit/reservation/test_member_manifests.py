"""Member pod manifests: placement and resources from the spec, launch pods matching the PodTemplate
they were reserved with, scheduling gates, and the rank environment of each distributed framework."""

from __future__ import annotations

import pytest

from airflow_provider_gang.reservation import naming
from airflow_provider_gang.reservation.manifests import pods, provisioning, rank_env
from airflow_provider_gang.reservation.spec import Distributed, MemberResources
from tests.builders import gang_spec, template

UID = "0f1e2d3c-owner"
SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "restartPolicy")


def _env(container):
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container["env"]}


ON_DEMAND_ONLY = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]}]}
    ]
}

PLACEMENT = [
    ("strict-zone", {"zone": "us-a", "strict_zone": True}, {"nodeSelector": {"topology.kubernetes.io/zone": "us-a"}}),
    (
        "preferred-zone",
        {"zone": "us-a"},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": ON_DEMAND_ONLY,
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-a"]}
                                ]
                            },
                        }
                    ],
                }
            }
        },
    ),
    ("spot", {"spot": True}, {"nodeSelector": pods.SPOT_NODE_SELECTOR, "tolerations": [pods.SPOT_TOLERATION]}),
    (
        "spot-toleration-not-duplicated",
        {"spot": True, "pod_template": template(tolerations=[pods.SPOT_TOLERATION])},
        {"tolerations": [pods.SPOT_TOLERATION]},
    ),
    (
        "user-selector-kept",
        {"zone": "us-a", "strict_zone": True, "pod_template": template(nodeSelector={"pool": "a"})},
        {"nodeSelector": {"pool": "a", "topology.kubernetes.io/zone": "us-a"}},
    ),
    (
        "nothing-but-on-demand",
        {},
        {
            "nodeSelector": None,
            "tolerations": None,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ON_DEMAND_ONLY}},
        },
    ),
    ("spot-has-no-on-demand-rule", {"spot": True}, {"affinity": None}),
    (
        "on-demand-joins-every-user-term",
        {
            "pod_template": template(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                            ]
                        }
                    }
                }
            )
        },
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}, pods.NOT_SPOT]},
                            {
                                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                                "matchExpressions": [pods.NOT_SPOT],
                            },
                        ]
                    }
                }
            }
        },
    ),
    (
        "reservation-required-beside-on-demand",
        {"reservation_name": "a100-res"},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    pods.NOT_SPOT,
                                    {
                                        "key": "cloud.google.com/reservation-name",
                                        "operator": "In",
                                        "values": ["a100-res"],
                                    },
                                ]
                            }
                        ]
                    }
                }
            }
        },
    ),
    (
        "on-demand-rule-not-duplicated",
        {
            "pod_template": template(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [pods.NOT_SPOT]}]
                        }
                    }
                }
            )
        },
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ON_DEMAND_ONLY}}},
    ),
]


@pytest.mark.parametrize(("overrides", "expected"), [c[1:] for c in PLACEMENT], ids=[c[0] for c in PLACEMENT])
def test_member_placement(overrides, expected):
    pod_spec = pods.member_template(gang_spec(**overrides))["spec"]
    assert {key: pod_spec.get(key) for key in expected} == expected


RESOURCES = [
    (
        "gpus-cpu-memory",
        MemberResources(gpus=2, cpu="8", memory="32Gi"),
        {},
        {
            "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"},
            "limits": {"memory": "32Gi", "nvidia.com/gpu": "2"},
        },
    ),
    (
        "amd",
        MemberResources(gpus=1, gpu_resource="amd.com/gpu"),
        {},
        {"requests": {"amd.com/gpu": "1"}, "limits": {"amd.com/gpu": "1"}},
    ),
    (
        "template-resources-kept",
        MemberResources(cpu="2"),
        {"requests": {"memory": "1Gi"}, "limits": {"cpu": "4"}},
        {"requests": {"memory": "1Gi", "cpu": "2"}, "limits": {"cpu": "4"}},
    ),
    ("nothing", MemberResources(), {}, None),
]


@pytest.mark.parametrize(
    ("resources", "in_template", "expected"), [c[1:] for c in RESOURCES], ids=[c[0] for c in RESOURCES]
)
def test_member_resources_on_first_container(resources, in_template, expected):
    containers = [
        {"name": "w", "image": "i", **({"resources": in_template} if in_template else {})},
        {"name": "sidecar", "image": "s"},
    ]
    spec = gang_spec(resources=resources, pod_template={"spec": {"containers": containers}})
    result = pods.member_template(spec)["spec"]["containers"]
    assert result[0].get("resources") == expected
    assert "resources" not in result[1]


def test_launch_pods_match_the_pod_template_scheduling_fields():
    spec = gang_spec(
        zone="us-a",
        spot=True,
        resources=MemberResources(gpus=1, cpu="4"),
        pod_template=template(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    )
    template_spec = provisioning.pod_template(spec, owner_uid=UID)["template"]["spec"]
    for rank in range(spec.size):
        pod_spec = pods.launch_pod(spec, rank, owner_uid=UID)["spec"]
        assert {k: pod_spec.get(k) for k in SCHEDULING_FIELDS} == {k: template_spec.get(k) for k in SCHEDULING_FIELDS}
        assert pod_spec["containers"][0]["resources"] == template_spec["containers"][0]["resources"]


def test_launch_pod_consumes_the_request_and_is_addressable():
    spec = gang_spec(
        pod_template={
            "metadata": {"annotations": {"team": "ml"}, "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "w", "image": "i"}]},
        }
    )
    pod = pods.launch_pod(spec, 2, owner_uid=UID)
    assert pod["metadata"]["name"] == f"{spec.name}-2"
    assert pod["metadata"]["annotations"] == {
        "team": "ml",
        "autoscaling.x-k8s.io/consume-provisioning-request": spec.name,
        "autoscaling.x-k8s.io/provisioning-class-name": "check-capacity.autoscaling.x-k8s.io",
    }
    assert pod["metadata"]["labels"] == {
        "app": "x",
        naming.GANG_LABEL: spec.name,
        naming.ROLE_LABEL: "member",
        naming.RANK_LABEL: "2",
    }
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"{spec.name}-2", spec.name)
    assert pod["spec"]["restartPolicy"] == "Never" and "schedulingGates" not in pod["spec"]


def test_launch_pod_refuses_kueue_mode():
    with pytest.raises(ValueError, match="ProvisioningRequest mode"):
        pods.launch_pod(gang_spec(mode="kueue"), 0, owner_uid=UID)


def test_gated_pod_adds_the_gang_gate_to_existing_gates():
    spec = gang_spec(mode="gates", pod_template=template(schedulingGates=[{"name": "example.com/other"}]))
    pod = pods.gated_pod(spec, 0, owner_uid=UID)
    assert pod["spec"]["schedulingGates"] == [
        {"name": "example.com/other"},
        {"name": naming.GangNames(spec.name).scheduling_gate},
    ]
    assert "autoscaling.x-k8s.io/consume-provisioning-request" in pod["metadata"]["annotations"]


def test_release_gate_patch():
    spec = gang_spec(mode="gates", pod_template=template(schedulingGates=[{"name": "example.com/other"}]))
    gate = naming.GangNames(spec.name).scheduling_gate
    pod = pods.gated_pod(spec, 0, owner_uid=UID)
    assert pods.release_gate_patch(pod, gate) == [
        {"op": "test", "path": "/spec/schedulingGates/1", "value": {"name": gate}},
        {"op": "remove", "path": "/spec/schedulingGates/1"},
    ]
    pod["spec"]["schedulingGates"].pop()
    assert pods.release_gate_patch(pod, gate) == []
    assert pods.release_gate_patch({}, gate) == []


ENVIRONMENTS = [
    ("none", None, 1, {"GANG_NAME": "gang-t1-abc", "GANG_RANK": "1", "GANG_SIZE": "4", "GANG_ORIGINAL_SIZE": "8"}),
    (
        "torch",
        "torch",
        3,
        {
            "GANG_NAME": "gang-t1-abc",
            "GANG_RANK": "1",
            "GANG_SIZE": "4",
            "GANG_ORIGINAL_SIZE": "8",
            "MASTER_ADDR": "gang-t1-abc-0.gang-t1-abc.ml.svc",
            "MASTER_PORT": "29500",
            "WORLD_SIZE": "4",
            "RANK": "1",
            "LOCAL_RANK": "0",
            "PET_NNODES": "4",
            "PET_NODE_RANK": "1",
            "PET_MASTER_ADDR": "gang-t1-abc-0.gang-t1-abc.ml.svc",
            "PET_MASTER_PORT": "29500",
            "PET_NPROC_PER_NODE": "3",
        },
    ),
    (
        "jax",
        "jax",
        0,
        {
            "GANG_NAME": "gang-t1-abc",
            "GANG_RANK": "1",
            "GANG_SIZE": "4",
            "GANG_ORIGINAL_SIZE": "8",
            "JAX_COORDINATOR_ADDRESS": "gang-t1-abc-0.gang-t1-abc.ml.svc:29500",
            "JAX_NUM_PROCESSES": "4",
            "JAX_PROCESS_ID": "1",
        },
    ),
]


@pytest.mark.parametrize(
    ("distributed", "gpus", "expected"), [c[1:] for c in ENVIRONMENTS], ids=[c[0] for c in ENVIRONMENTS]
)
def test_rank_environment(distributed, gpus, expected):
    spec = gang_spec(distributed=distributed, original_size=8, resources=MemberResources(gpus=gpus))
    pod = pods.launch_pod(spec, 1, owner_uid=UID)
    assert _env(pod["spec"]["containers"][0]) == expected


def test_rank_environment_overrides_user_values_and_master_address():
    spec = gang_spec(
        distributed="torch",
        pod_template=template()
        | {
            "spec": {
                "containers": [
                    {
                        "name": "w",
                        "image": "i",
                        "env": [{"name": "RANK", "value": "9"}, {"name": "KEEP", "value": "me"}],
                    }
                ]
            }
        },
    )
    env = _env(pods.launch_pod(spec, 0, owner_uid=UID, master_address="127.0.0.1")["spec"]["containers"][0])
    assert (env["RANK"], env["KEEP"], env["MASTER_ADDR"], env["PET_MASTER_ADDR"]) == (
        "0",
        "me",
        "127.0.0.1",
        "127.0.0.1",
    )


@pytest.mark.parametrize("distributed", list(Distributed), ids=lambda framework: framework.value)
def test_the_framework_variables_are_exactly_those_rank_environment_writes(distributed):
    """``FRAMEWORK_VARIABLES`` is what the parse-time env check refuses: a name written but not
    listed there would overwrite a user's value silently."""
    written = [entry["name"] for entry in rank_env.rank_environment(gang_spec(distributed=distributed.value), 1)]
    expected = list(rank_env.FRAMEWORK_VARIABLES[distributed])
    assert [name for name in written if name not in rank_env.PROVIDER_VARIABLES] == expected
