"""Termination messages as the kubelet reads them: file tail, log fallback on error, per-pod limit,
and the local-process path rewriting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gang_sim.controllers.kubelet import termination_messages as messages


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {"containers": list(containers)}}


def _terminated(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code, "reason": "Error" if code else "Completed"}}}


LOG = "".join(f"line {index}\n" for index in range(200))


@pytest.mark.parametrize(
    ("policy", "code", "file_text", "expected"),
    [
        pytest.param("File", 0, '{"step": 7}', '{"step": 7}', id="file"),
        pytest.param("File", 1, None, "", id="file-policy-never-reads-logs"),
        pytest.param("FallbackToLogsOnError", 1, "", "".join(f"line {i}\n" for i in range(120, 200)), id="fallback"),
        pytest.param("FallbackToLogsOnError", 0, None, "", id="no-fallback-on-success"),
        pytest.param("FallbackToLogsOnError", 2, "written", "written", id="file-wins-over-logs"),
    ],
)
def test_container_message(policy: str, code: int, file_text: str | None, expected: str) -> None:
    container = {"name": "c", "terminationMessagePolicy": policy}
    tail = lambda lines: "".join(LOG.splitlines(keepends=True)[-lines:])  # noqa: E731
    assert messages.container_message(container, code, file_text, tail) == expected


def test_limits_file_tail_log_bytes_and_pod_share() -> None:
    container = {"name": "c", "terminationMessagePolicy": "FallbackToLogsOnError"}
    assert messages.container_message(container, 0, "x" * 5000 + "END", lambda lines: "") == ("x" * 4093 + "END")
    long_lines = lambda lines: "".join("y" * 99 + "\n" for _ in range(lines))  # noqa: E731
    assert len(messages.container_message(container, 1, None, long_lines)) == 2048
    containers = [{"name": f"c{index}"} for index in range(4)]
    statuses = [_terminated(f"c{index}", 0) for index in range(4)]
    filled = messages.fill(_pod(*containers), statuses, lambda name: "z" * 4000, lambda name, lines: "")
    assert [len(status["state"]["terminated"]["message"]) for status in filled] == [3072] * 4


def test_fill_keeps_a_runtime_message_first_and_skips_running_containers() -> None:
    statuses = [_terminated("a", 128), {"name": "b", "state": {"running": {}}}]
    statuses[0]["state"]["terminated"]["message"] = "failed to start"
    filled = messages.fill(_pod({"name": "a"}, {"name": "b"}), statuses, lambda name: "why", lambda name, lines: "")
    assert filled[0]["state"]["terminated"]["message"] == "failed to start: why"
    assert filled[1] == {"name": "b", "state": {"running": {}}}


def test_a_shared_terminated_state_is_not_mixed_between_containers() -> None:
    shared = {"exitCode": 0, "reason": "Completed"}
    statuses = [{"name": "a", "state": {"terminated": shared}}, {"name": "b", "state": {"terminated": shared}}]
    messages.fill(_pod({"name": "a"}, {"name": "b"}), statuses, lambda name: f"from {name}", lambda name, lines: "")
    assert [status["state"]["terminated"]["message"] for status in statuses] == ["from a", "from b"]
    assert "message" not in shared


def test_local_process_paths_are_rewritten(tmp_path: Path) -> None:
    file = messages.termination_file(tmp_path, "uid-1", "trainer")
    container = {"name": "trainer", "terminationMessagePath": "/tmp/msg"}
    env = messages.rewrite_env({"GANG_TERMINATION_MESSAGE_PATH": "/tmp/msg", "OTHER": "/tmp/msg2"}, container, file)
    assert env == {"GANG_TERMINATION_MESSAGE_PATH": str(file), "OTHER": "/tmp/msg2", messages.PATH_VARIABLE: str(file)}
    default = messages.rewrite_command(["sh", "-c", "echo done > /dev/termination-log"], {"name": "c"}, file)
    assert default == ["sh", "-c", f"echo done > {file}"]
    longer = messages.rewrite_command(["cat /dev/termination-log2 /dev/termination-log"], {"name": "c"}, file)
    assert longer == [f"cat /dev/termination-log2 {file}"]
    assert messages.read_tail(file) is None
    file.parent.mkdir(parents=True)
    file.write_text("abc")
    assert messages.read_tail(file) == "abc"
