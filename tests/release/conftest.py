"""The release artifacts, built once for the module's tests: the sdists and wheels of the provider and
of gang-sim, made by the commands docs/installation.md shows (``python -m build --outdir dist .`` and
``... gang-sim``), run in a copy of the repository (so the build's ``build/`` and ``*.egg-info`` stay out
of the working tree) with ``dist`` put in the test's folder. ``python -m build`` builds each sdist, then
the wheel from the unpacked sdist, in isolated environments (setuptools from pip's cache)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.pages import REPOSITORY, shown_command
from tests.standalone.processes import tail

NOT_SOURCES = shutil.ignore_patterns(
    ".venv", ".venv-*", ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache"
)
BUILD_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class Artifacts:
    """The built distributions, found by their names in ``dist``."""

    dist: Path

    def one(self, pattern: str) -> Path:
        (found,) = self.dist.glob(pattern)
        return found


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    folder = tmp_path_factory.mktemp("release")
    copy = folder / "airflow-provider-gang"
    shutil.copytree(REPOSITORY, copy, ignore=NOT_SOURCES)
    for source in (".", "gang-sim"):
        shown = shown_command("docs/installation.md", f"python -m build --outdir dist {source}")
        command = shlex.split(shown.replace("--outdir dist", f"--outdir {folder / 'dist'}"))
        assert command[0] == "python"
        result = subprocess.run(
            [sys.executable, *command[1:]],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
        assert result.returncode == 0, f"{shown}:\n{tail(result.stdout + result.stderr)}"
    return Artifacts(folder / "dist")
