"""``make test``'s gate on the real tier (the Makefile's ``real-preflight`` and the real targets): under
``CI=true`` a real control plane not built fails at once naming ``make real-cluster``; elsewhere it is
built in the background, the real lanes waiting for it; ``GANG_REAL=0`` skips it on purpose in one
line, but not under ``CI=true``; a build under way in the background (``.ci/run``) lets it pass."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
_OUTER = ("CI", "GANG_REAL", "GANG_REAL_CLUSTER_BUILD_LOG", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")


def make(
    target: str, cache: Path, environment: Mapping[str, str] = {}, *arguments: str
) -> subprocess.CompletedProcess[str]:
    """``make <target>`` in this repository with ``cache`` as the real control plane's cache (the venv
    is taken as up to date: ``-o`` the install stamp)."""
    variables = {k: v for k, v in os.environ.items() if k not in _OUTER}
    variables.update({"GANG_REAL_CLUSTER_CACHE": str(cache), **environment})
    return subprocess.run(
        ["make", "--no-print-directory", "-s", "-o", ".venv/.installed-stamp", target, *arguments],
        cwd=REPOSITORY, capture_output=True, text=True, env=variables, timeout=120, check=False,
    )  # fmt: skip


def test_ci_with_no_real_control_plane_fails_at_once_naming_the_command(tmp_path: Path) -> None:
    result = make("real-preflight", tmp_path, {"CI": "true"})
    assert result.returncode != 0
    assert "make real-cluster" in result.stderr and "cluster-autoscaler" in result.stderr


def test_a_developer_without_it_gets_it_built_in_the_background_and_the_real_tier_waits(tmp_path: Path) -> None:
    # No autoscaler source: the background build stops at once, so the real tier then fails with its log.
    log = tmp_path / "real-cluster.log"
    no_source = {"GANG_CLUSTER_AUTOSCALER_SRC": str(tmp_path / "none")}
    started = make("real-preflight", tmp_path / "cache", no_source, f"REAL_BUILD_LOG={log}")
    assert started.returncode == 0, started.stderr
    assert "building it in the background" in started.stdout and "GANG_REAL=0" in started.stdout
    waited = make("real-ready", tmp_path / "cache", no_source, f"REAL_BUILD_LOG={log}")
    assert waited.returncode != 0
    assert "GANG_CLUSTER_AUTOSCALER_SRC" in waited.stdout and "building the real control plane failed" in waited.stderr


def test_gang_real_0_skips_it_in_one_line_but_not_under_ci(tmp_path: Path) -> None:
    skipped = make("real-preflight", tmp_path, {"GANG_REAL": "0"})
    assert skipped.returncode == 0 and skipped.stdout.strip() == "the real tier is skipped on purpose (GANG_REAL=0)"
    lane = make("real-shared-cluster", tmp_path, {"GANG_REAL": "0"})
    assert lane.returncode == 0 and lane.stdout.strip() == "real-shared-cluster: skipped on purpose (GANG_REAL=0)"
    refused = make("real-preflight", tmp_path, {"GANG_REAL": "0", "CI": "true"})
    assert refused.returncode != 0 and "CI runs the real tier always" in refused.stderr


def test_a_build_under_way_passes_the_gate_and_a_failed_one_fails_the_real_tier_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("[real-cluster] kubernetes v1.37.2: building\n")
    under_way = {"CI": "true", "GANG_REAL_CLUSTER_BUILD_LOG": str(log)}
    passed = make("real-preflight", tmp_path / "cache", under_way)
    assert passed.returncode == 0 and "being built in the background" in passed.stdout
    # The build then fails (no autoscaler source): real-ready prints its log and fails the lane.
    failed = make(
        "real-ready", tmp_path / "cache", {**under_way, "GANG_CLUSTER_AUTOSCALER_SRC": str(tmp_path / "none")}
    )
    assert failed.returncode != 0
    assert "kubernetes v1.37.2: building" in failed.stdout and "GANG_CLUSTER_AUTOSCALER_SRC" in failed.stdout
    assert "building the real control plane failed" in failed.stderr
