"""``gang-sim serve``: ready line, kubeconfig, clean exit on SIGTERM; bad options exit 2. ``gang-sim real --check``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import yaml

from gang_sim.testing.real.binaries import REQUIRED

COMMAND = [sys.executable, "-c", "from gang_sim.cli import main; raise SystemExit(main())"]


def test_serve_prints_ready_writes_a_kubeconfig_and_exits_cleanly_on_sigterm(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen(
        [*COMMAND, "serve", "--kubeconfig-out", str(kubeconfig), "--faults", "seed:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("ready: https://127.0.0.1:")
        document = yaml.safe_load(kubeconfig.read_text())
        assert document["clusters"][0]["cluster"]["server"] == line.split(" ", 1)[1].strip()
        assert document["users"][0]["user"]["token"]
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=30)
    assert process.returncode == 0, errors


def test_bad_faults_spec_is_a_usage_error(tmp_path):
    result = subprocess.run(
        [*COMMAND, "serve", "--kubeconfig-out", str(tmp_path / "k"), "--faults", "oops"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "bad fault item" in result.stderr


def test_a_harness_that_fails_to_start_leaves_no_thread_behind():
    import threading

    import pytest

    from gang_sim.testing import ClusterHarness

    before = {t.name for t in threading.enumerate()}
    with pytest.raises(ValueError), ClusterHarness(faults="not a fault spec"):
        pass
    assert "gang-sim" not in {t.name for t in threading.enumerate()} - before


def test_real_check_names_what_is_missing_and_the_command_or_says_where_it_is_built(tmp_path):
    environment = {**os.environ, "GANG_REAL_CLUSTER_CACHE": str(tmp_path)}
    missing = subprocess.run(
        [*COMMAND, "real", "--check"], capture_output=True, text=True, env=environment, timeout=60, check=False
    )
    assert missing.returncode == 2
    assert "make real-cluster" in missing.stderr and "cluster-autoscaler" in missing.stderr
    binaries = tmp_path / "v1.37.2" / "bin"
    binaries.mkdir(parents=True)
    for name in REQUIRED:
        (binaries / name).write_text("#!/bin/sh\n")
        (binaries / name).chmod(0o755)
    built = subprocess.run(
        [*COMMAND, "real", "--check"], capture_output=True, text=True, env=environment, timeout=60, check=False
    )
    assert built.returncode == 0 and str(binaries) in built.stdout


def test_real_without_a_kubeconfig_path_is_a_usage_error(tmp_path):
    result = subprocess.run([*COMMAND, "real"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "--kubeconfig-out" in result.stderr


def test_real_multikueue_without_kueue_is_a_usage_error(tmp_path):
    result = subprocess.run(
        [*COMMAND, "real", "--scenario", "multikueue", "--no-kueue", "--kubeconfig-out", str(tmp_path / "k")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "--scenario multikueue needs Kueue" in result.stderr
