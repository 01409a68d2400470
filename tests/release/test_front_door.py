"""The README's second set-up command, ``make demo``, as the quick start shows it: the nightly DAG on
the emulator succeeds and the report ends with no pod left. (``make test``, the first, is what CI
runs: ``.ci/run``.)"""

from __future__ import annotations

import shlex
import subprocess

import pytest

from tests.docs.pages import REPOSITORY, shown_command
from tests.standalone.processes import tail


@pytest.mark.timeout(600)
def test_make_demo_runs_the_nightly_dag_on_the_emulator() -> None:
    command = shlex.split(shown_command("docs/quickstart.md", "make demo"))
    assert command == shlex.split(shown_command("README.md", "make demo"))
    result = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=540, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, tail(output, 60)
    assert "Task state: success" in output, tail(output, 60)
    assert "Pods left in the cluster: 0" in output, tail(output, 60)
