"""The provider's wheel works without the repository: installed - not editable, not from the
repository - into a fresh virtual environment with Airflow and gang-sim's wheel, it runs the quick
start's DAG against ``gang-sim serve`` as docs/quickstart.md shows.

Third-party versions are pinned to this test environment's (``pip freeze --exclude-editable`` as
constraints: the set the suites pass with, and pip takes them from its cache); the provider's own
requirements come from its wheel's metadata. The provider wheel is then installed with the command
docs/installation.md shows. The DAG file is copied into a DAGs folder in the test's folder, and every
process runs there with a fresh ``AIRFLOW_HOME`` and no ``PYTHONPATH``, so nothing is imported from
the repository.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.docs.emulator_session import assert_succeeded, run_first_dag
from tests.docs.pages import DOCS, shown_command
from tests.release.conftest import Artifacts
from tests.standalone.processes import tail

INSTALL_TIMEOUT_SECONDS = 900


def _run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{shlex.join(command)}:\n{tail(result.stdout + result.stderr)}"
    return result.stdout


def _requirements(wheel: Path) -> list[str]:
    """The wheel's own ``Requires-Dist`` (not its extras')."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    return [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist: ") and "extra ==" not in line]


def _fresh_environment(home: Path, dags: Path, venv: Path) -> dict[str, str]:
    inherited = {
        key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW") and key != "PYTHONPATH"
    }
    return {
        **inherited,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }


@pytest.mark.timeout(1800)
def test_the_installed_wheel_runs_the_quick_start_dag_on_the_emulator(artifacts: Artifacts, tmp_path: Path) -> None:
    venv, home, dags = tmp_path / "venv", tmp_path / "airflow-home", tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DOCS / "examples" / "first_gang.py", dags)
    env = _fresh_environment(home, dags, venv)
    python = str(venv / "bin" / "python")
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(_run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=tmp_path, env=env))

    shown = shown_command("docs/installation.md", "pip install dist/")
    provider = artifacts.dist / shlex.split(shown)[-1].removeprefix("dist/")
    assert provider.is_file(), f"docs/installation.md installs {shown}, but python -m build made {artifacts.dist}"
    emulator = artifacts.one("gang_sim-*.whl")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "-c", str(constraints), str(emulator), *_requirements(provider)], cwd=tmp_path, env=env, timeout=900)
    _run([*pip, "-c", str(constraints), *shlex.split(shown)[2:-1], str(provider)], cwd=tmp_path, env=env)

    where = _run(
        [python, "-c", "import airflow_provider_gang, gang_sim; print(airflow_provider_gang.__file__)"],
        cwd=tmp_path,
        env=env,
    )
    assert where.startswith(str(venv)), where  # the installed wheel, not the repository
    _run([str(venv / "bin" / "airflow"), "db", "migrate"], cwd=tmp_path, env=env)
    run = run_first_dag("docs/quickstart.md", "first_gang", work=tmp_path, bin_dir=venv / "bin", env=env)
    assert_succeeded(run, "first_gang")
    assert "[rank 0] rank 0 of 2" in run.output, tail(run.output, 80)
