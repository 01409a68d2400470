"""The two wheels of this repository: the provider's carries no emulator, the emulator's carries its data.

Both are built the way pip installs a local folder (``pip wheel --no-deps``, PEP 517 through
setuptools, https://pip.pypa.io/en/stable/cli/pip_wheel/) from a copy of the repository, so the build
leaves no ``build/`` or ``*.egg-info`` in the working tree. ``--no-build-isolation --no-index``: the
test environment's setuptools builds them, nothing is downloaded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
EMULATOR_SOURCE = REPOSITORY / "gang-sim" / "src" / "gang_sim"
_NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"
)

PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]

pytestmark = pytest.mark.timeout(300)


def _wheel(project: Path, into: Path) -> zipfile.ZipFile:
    """Build the wheel of the project folder ``project`` into ``into`` and open it."""
    subprocess.run(
        [*PIP_WHEEL, "--wheel-dir", str(into), str(project)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (built,) = into.glob("*.whl")
    return zipfile.ZipFile(built)


@pytest.fixture(scope="module")
def repository_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("repository") / "airflow-provider-gang"
    shutil.copytree(REPOSITORY, copy, ignore=_NOT_SOURCES)
    return copy


def _text(wheel: zipfile.ZipFile, suffix: str) -> str:
    (name,) = [name for name in wheel.namelist() if name.endswith(suffix)]
    return wheel.read(name).decode()


def test_the_provider_wheel_carries_no_emulator(repository_copy: Path, tmp_path: Path) -> None:
    with _wheel(repository_copy, tmp_path) as wheel:
        names = wheel.namelist()
        entry_points = _text(wheel, ".dist-info/entry_points.txt")
        metadata = _text(wheel, ".dist-info/METADATA")
    assert "airflow_provider_gang/operators/__init__.py" in names
    assert [name for name in names if name.startswith("gang_sim") or "/sim/" in name or "crds" in name] == []
    assert not [name for name in names if name.endswith("demo.py")], "the demo runner is not part of the provider"
    assert "gang-sim" not in entry_points
    assert "Provides-Extra: sim" not in metadata


def test_the_emulator_wheel_carries_its_crds_scenarios_and_command(repository_copy: Path, tmp_path: Path) -> None:
    with _wheel(repository_copy / "gang-sim", tmp_path) as wheel:
        names = set(wheel.namelist())
        entry_points = _text(wheel, ".dist-info/entry_points.txt")
    data = {
        f"gang_sim/{path.relative_to(EMULATOR_SOURCE).as_posix()}"
        for folder in ("apiserver/crds", "world/scenarios")
        for path in (EMULATOR_SOURCE / folder).glob("*.yaml")
    }
    assert len(data) > 10
    assert data <= names, f"package data missing from the wheel: {sorted(data - names)}"
    assert "gang_sim/testing/pytest_plugin.py" in names
    assert not [name for name in names if name.startswith("airflow_provider_gang")]
    assert "gang-sim = gang_sim.cli:main" in entry_points
