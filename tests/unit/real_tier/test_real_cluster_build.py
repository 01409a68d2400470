"""``make real-cluster``'s script (hack/real-cluster/build.sh), the parts that run without Go: where
the cluster-autoscaler's source comes from, one line when there is none (before anything is built),
a source at another commit refused, a cached binary kept, and one build of a cache at a time."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
SCRIPT = REPOSITORY / "hack" / "real-cluster" / "build.sh"
VERSION = "v1.37.2"


def run(cache: Path, *arguments: str, environment: Mapping[str, str] = {}) -> subprocess.CompletedProcess[str]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("GANG_", "CLUSTER_AUTOSCALER_"))}
    variables.update({"GANG_REAL_CLUSTER_CACHE": str(cache), **environment})
    return subprocess.run(
        ["bash", str(SCRIPT), *arguments], capture_output=True, text=True, env=variables, timeout=60, check=False
    )


def archive_source(folder: Path, commit_tree: Path) -> Path:
    """A source folder with the two trees as archives; the first without a commit header."""
    folder.mkdir(parents=True)
    for tree in ("cluster-autoscaler", "autoscaler-apis"):
        (commit_tree / tree).mkdir(parents=True)
        (commit_tree / tree / "go.mod").write_text(f"module example.com/{tree}\n")
        with tarfile.open(folder / f"{tree}-0000000.tar.gz", "w:gz") as archive:
            archive.add(commit_tree / tree, arcname=tree)
    return folder


def test_no_source_is_one_line_naming_the_variable_and_all_builds_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for step in ("cluster_autoscaler", "all"):
        result = run(tmp_path / "cache", step, environment={"GANG_CLUSTER_AUTOSCALER_SRC": str(missing)})
        assert result.returncode == 1
        (line,) = result.stderr.splitlines()
        assert "GANG_CLUSTER_AUTOSCALER_SRC" in line and str(missing) in line
    assert list((tmp_path / "cache" / VERSION / "bin").iterdir()) == []


def test_a_checkout_at_another_commit_is_refused_naming_both(tmp_path: Path) -> None:
    source = tmp_path / "source"
    checkout = source / "cluster-autoscaler"
    checkout.mkdir(parents=True)
    (source / "autoscaler-apis").mkdir()
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "other"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    result = run(tmp_path / "cache", "cluster_autoscaler", environment={"GANG_CLUSTER_AUTOSCALER_SRC": str(source)})
    assert result.returncode == 1
    assert head in result.stderr and "33c3f97bf2749b1385d9223f1f8856fe345011f7" in result.stderr
    assert "CLUSTER_AUTOSCALER_COMMIT" in result.stderr


def test_the_default_source_is_the_nearest_shared_folder_above_the_checkout(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "third_party" / "cluster-autoscaler"
    archive_source(shared, tmp_path / "trees")
    checkout = tmp_path / "wt" / "clone"
    (checkout / "hack" / "real-cluster").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "hack" / "real-cluster" / "build.sh")
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("GANG_", "CLUSTER_AUTOSCALER_"))}
    variables.update(
        {"GANG_REAL_CLUSTER_CACHE": str(tmp_path / "cache"), "PATH": f"{tmp_path / 'nogo'}:{os.environ['PATH']}"}
    )
    # A `go` that fails at once: the script gets as far as resolving modules, from the default source.
    (tmp_path / "nogo").mkdir()
    (tmp_path / "nogo" / "go").write_text('#!/bin/sh\necho "go $*" >&2\nexit 7\n')
    (tmp_path / "nogo" / "go").chmod(0o755)
    result = subprocess.run(
        ["bash", str(checkout / "hack" / "real-cluster" / "build.sh"), "cluster_autoscaler"],
        capture_output=True, text=True, env=variables, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 7
    assert f"unpacking {shared}" in result.stderr and "go mod edit" in result.stderr
    unpacked = tmp_path / "cache" / VERSION / "work" / "cluster-autoscaler"
    assert sorted(path.name for path in unpacked.iterdir()) == ["autoscaler-apis", "cluster-autoscaler"]


def test_a_cached_binary_is_kept_and_its_commit_printed(tmp_path: Path) -> None:
    out = tmp_path / "cache" / VERSION
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "cluster-autoscaler").write_text("#!/bin/sh\n")
    (out / "bin" / "cluster-autoscaler").chmod(0o755)
    (out / "cluster-autoscaler.commit").write_text("abc123\n")
    result = run(tmp_path / "cache", "cluster_autoscaler", environment={"GANG_CLUSTER_AUTOSCALER_SRC": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "cluster-autoscaler abc123: cached" in result.stderr
    assert "abc123 (sigs.k8s.io/cluster-autoscaler/kwok)" in result.stdout


def test_a_second_build_of_a_cache_waits_for_the_first(tmp_path: Path) -> None:
    out = tmp_path / "cache" / VERSION
    out.mkdir(parents=True)
    environment = {
        **os.environ,
        "GANG_REAL_CLUSTER_CACHE": str(tmp_path / "cache"),
        "GANG_CLUSTER_AUTOSCALER_SRC": "/nowhere",
    }
    with (out / "build.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen(
            ["bash", str(SCRIPT), "cluster_autoscaler"], stderr=subprocess.PIPE, text=True, env=environment
        )
        assert waiting.stderr is not None
        assert "another build of" in waiting.stderr.readline()
        assert waiting.poll() is None
    _, rest = waiting.communicate(timeout=60)
    assert waiting.returncode == 1 and "GANG_CLUSTER_AUTOSCALER_SRC" in rest
