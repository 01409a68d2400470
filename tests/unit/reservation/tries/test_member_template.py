"""The member pod template the operator's arguments describe: one container from ``image``, or a
full template with ``command``/``args``/``env`` applied to its first container, GPU members
tolerating the GPU taint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_gang.reservation.tries.member_template import TRAINER_CONTAINER, build_member_template

NONE: dict[str, Any] = {
    "image": None,
    "command": None,
    "args": None,
    "env": None,
    "pod_template": None,
    "pod_template_file": None,
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_an_image_makes_a_one_container_template() -> None:
    made = build_member_template(**{**NONE, "image": "trainer:1"})
    assert made == {"metadata": {}, "spec": {"containers": [{"name": TRAINER_CONTAINER, "image": "trainer:1"}]}}


def test_arguments_apply_to_the_first_container_of_a_template() -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "main", "image": "t:1", "env": [{"name": "EPOCHS", "value": "1"}, {"name": "K", "value": "v"}]}
            ],
            "tolerations": [GPU_TOLERATION],
        }
    }
    made = build_member_template(
        **{**NONE, "pod_template": template, "command": ("python",), "args": ["-u"], "env": {"EPOCHS": "3"}}, gpus=1
    )
    trainer = made["spec"]["containers"][0]
    assert (trainer["command"], trainer["args"]) == (["python"], ["-u"])
    assert trainer["env"] == [{"name": "K", "value": "v"}, {"name": "EPOCHS", "value": "3"}]
    assert made["spec"]["tolerations"] == [GPU_TOLERATION]  # not added twice


def test_gpu_members_tolerate_their_resource_s_taint() -> None:
    made = build_member_template(**{**NONE, "image": "t:1"}, gpus=2, gpu_resource="amd.com/gpu")
    assert made["spec"]["tolerations"] == [{**GPU_TOLERATION, "key": "amd.com/gpu"}]
    assert "tolerations" not in build_member_template(**{**NONE, "image": "t:1"})["spec"]


def test_a_template_without_containers_is_left_for_the_spec_to_refuse() -> None:
    made = build_member_template(**{**NONE, "pod_template": {"spec": {"containers": []}}, "command": ["x"]}, gpus=1)
    assert made["spec"] == {"containers": []}


def test_a_template_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "member.yaml"
    path.write_text("spec:\n  containers:\n  - name: main\n    image: t:2\n")
    made = build_member_template(**{**NONE, "pod_template_file": str(path), "args": ["--fast"]})
    assert made["spec"]["containers"][0] == {"name": "main", "image": "t:2", "args": ["--fast"]}
