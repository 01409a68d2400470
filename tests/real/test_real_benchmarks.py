"""The benchmarks' real backend in their smallest size: ``bench/launch.py`` and
``bench/triggerer_load.py`` run against the real control plane (``make real-cluster``) and print their
figures. What they measure is read from the output, not judged: performance claims are the
benchmarks' own, printed beside their anchor."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.child_processes import REPOSITORY, child_environment


def run_bench(*arguments: str) -> str:
    # The repository for ``bench``, ahead of whatever the caller's path already held.
    result = subprocess.run(
        [sys.executable, *arguments],
        cwd=REPOSITORY,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.timeout(450)
def test_launch_on_the_real_scheduler_binds_every_member_of_both_ways() -> None:
    output = run_bench("bench/launch.py", "--backend", "real", "--sizes", "8", "--modes", "gates")
    assert "Provisioned=True set by the bench" in output
    rows = re.findall(r"^\s+gates\s+8\s+(sequential|concurrent)\s+[\d.]+s\s+[\d.]+s\s+(\d+)$", output, re.MULTILINE)
    # one LIST of the gated members, then one gate release per member
    assert rows == [("sequential", "9"), ("concurrent", "9")], output
    assert re.search(r"gates\s+8\s+ratio sequential / concurrent: bound [\d.]+x", output), output


@pytest.mark.timeout(450)
def test_triggerer_load_counts_the_waiting_triggers_on_the_real_apiserver() -> None:
    output = run_bench("bench/triggerer_load.py", "--smoke", "--backend", "real", "--modes", "provisioning_request")
    fields = next(line.split() for line in output.splitlines() if line.split()[:2] == ["real", "provisioning_request"])
    gangs, connections, watches = fields[2], fields[4], fields[5]
    # three waiting gangs share one connection and one watch of ProvisioningRequests
    assert (gangs, connections, watches) == ("3", "1", "1"), output
