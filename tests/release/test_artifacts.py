"""What ``python -m build`` makes: metadata PyPI accepts (``twine check``), and the provider wheel's
contents - its package data, ``py.typed``, the license, the entry points Airflow discovers it by, and
no emulator, demo, tests or docs."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import pytest
import tomllib

from tests.docs.pages import REPOSITORY
from tests.release.conftest import Artifacts

pytestmark = pytest.mark.timeout(400)

VERSION = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["version"]
PROVIDER_WHEEL = f"airflow_provider_gang-{VERSION}-py3-none-any.whl"
DIST_INFO = f"airflow_provider_gang-{VERSION}.dist-info"


def test_twine_accepts_the_metadata_of_every_artifact(artifacts: Artifacts) -> None:
    built = sorted(artifacts.dist.iterdir())
    assert [path.name for path in built] == [
        PROVIDER_WHEEL,
        f"airflow_provider_gang-{VERSION}.tar.gz",
        f"gang_sim-{VERSION}-py3-none-any.whl",
        f"gang_sim-{VERSION}.tar.gz",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, built)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 4, result.stdout


def test_the_provider_wheel_carries_its_package_data_license_and_entry_points(artifacts: Artifacts) -> None:
    with zipfile.ZipFile(artifacts.one(PROVIDER_WHEEL)) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(f"{DIST_INFO}/entry_points.txt").decode()
        metadata = wheel.read(f"{DIST_INFO}/METADATA").decode()
        license_text = wheel.read(f"{DIST_INFO}/licenses/LICENSE").decode()
    sources = {
        path.relative_to(REPOSITORY).as_posix()
        for path in (REPOSITORY / "airflow_provider_gang").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sources <= names, f"missing from the wheel: {sorted(sources - names)}"
    assert {"airflow_provider_gang/py.typed", "airflow_provider_gang/plugin/templates/page.html.j2"} <= names
    outside = {name.split("/")[0] for name in names} - {"airflow_provider_gang", DIST_INFO}
    assert outside == set(), f"the wheel carries more than the provider: {outside}"
    assert "provider_info = airflow_provider_gang.get_provider_info:get_provider_info" in entry_points
    assert "gang = airflow_provider_gang.plugin:GangPlugin" in entry_points
    assert "gang-sim" not in entry_points
    assert license_text == (REPOSITORY / "LICENSE").read_text()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "Requires-Dist: apache-airflow<4,>=3.1" in metadata.splitlines()
    requirements = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    assert not [line for line in requirements if "gang-sim" in line or "gang_sim" in line]


def test_the_sdists_build_the_wheels_alone(artifacts: Artifacts) -> None:
    """``python -m build`` made each wheel from its sdist: the sdist holds what the wheel needs, and the
    license travels with both."""
    with tarfile.open(artifacts.one("airflow_provider_gang-*.tar.gz")) as sdist:
        provider = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    with tarfile.open(artifacts.one("gang_sim-*.tar.gz")) as sdist:
        emulator = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "airflow_provider_gang/plugin/templates/page.html.j2"} <= provider
    assert not [name for name in provider if name.startswith(("tests/", "gang-sim/", "demo/", "docs/"))]
    assert {"LICENSE", "README.md", "pyproject.toml"} <= emulator
    assert [name for name in emulator if name.startswith("src/gang_sim/apiserver/crds/")]
