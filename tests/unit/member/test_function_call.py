"""The ``@task.gang`` call as the member runs it: the runner is this module's source run with
``python -c`` in a child process, as in a container; rank 0's line read back from its output."""

from __future__ import annotations

import ast
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_gang.member import function_call
from airflow_provider_gang.member.function_call import (
    MARKER,
    MAX_RETURN_VALUE_BYTES,
    RETURN_VALUE_EXIT_CODE,
    CallError,
    ReturnValueError,
)


def run_member(source: str, *args: Any, rank: str = "0", termination: Path, **kwargs: Any) -> Any:
    """Run the function of ``source`` as a member of rank ``rank`` would; the finished process."""
    name = ast.parse(source).body[0].name  # type: ignore[attr-defined]
    command, arguments = function_call.member_command(function_call.encode_call(source, name, args, kwargs))
    arguments[0] = str(termination)  # the container's termination message path
    environment = {**os.environ, "GANG_RANK": rank}
    environment.pop("GANG_TERMINATION_MESSAGE_PATH", None)
    return subprocess.run(
        [sys.executable, *command[1:], *arguments], env=environment, capture_output=True, timeout=60, check=False
    )


def source_of(text: str) -> str:
    return textwrap.dedent(text).lstrip()


METRICS = source_of(
    """
    def train(epochs, *, scale=1.0):
        import os
        return {"rank": int(os.environ["GANG_RANK"]), "loss": 0.5 / epochs * scale, "tags": ("a", "b")}
    """
)


def test_rank_0_writes_its_return_value_as_the_last_line(tmp_path: Path) -> None:
    finished = run_member(METRICS, 4, termination=tmp_path / "message", scale=2.0)
    assert finished.returncode == 0, finished.stderr
    lines = finished.stdout.decode().splitlines()
    assert lines[-1].startswith(MARKER)
    assert function_call.read_return_value(finished.stdout.decode()) == {"rank": 0, "loss": 0.25, "tags": ["a", "b"]}


def test_other_ranks_return_values_are_ignored(tmp_path: Path) -> None:
    finished = run_member(METRICS, 4, rank="1", termination=tmp_path / "message")
    assert finished.returncode == 0 and MARKER not in finished.stdout.decode()


def test_an_async_function_is_run_to_its_result(tmp_path: Path) -> None:
    source = source_of(
        """
        async def fetch():
            import asyncio
            await asyncio.sleep(0)
            return [1, 2]
        """
    )
    finished = run_member(source, termination=tmp_path / "message")
    assert function_call.read_return_value(finished.stdout.decode()) == [1, 2]


def test_an_exception_ends_the_member_with_its_traceback(tmp_path: Path) -> None:
    source = source_of(
        """
        def fail():
            raise RuntimeError("out of patience")
        """
    )
    finished = run_member(source, termination=tmp_path / "message")
    stderr = finished.stderr.decode()
    assert finished.returncode == 1 and "RuntimeError: out of patience" in stderr
    assert 'raise RuntimeError("out of patience")' in stderr  # the source line, through linecache
    assert MARKER not in finished.stdout.decode()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        pytest.param("return object()", "is not JSON-serializable", id="unserializable"),
        pytest.param(f"return 'x' * {MAX_RETURN_VALUE_BYTES}", "hands on at most 1048576", id="too-large"),
    ],
)
def test_a_return_value_that_cannot_be_sent_ends_rank_0_with_its_reason(tmp_path: Path, body: str, said: str) -> None:
    termination = tmp_path / "message"
    finished = run_member(f"def result():\n    {body}\n", termination=termination)
    assert finished.returncode == RETURN_VALUE_EXIT_CODE
    assert said in finished.stderr.decode() and said in termination.read_text()
    assert MARKER not in finished.stdout.decode()


def test_a_checkpoint_report_in_the_termination_message_is_kept(tmp_path: Path) -> None:
    termination = tmp_path / "message"
    termination.write_text('{"checkpoint_step": 20}')
    finished = run_member("def result():\n    return {1, 2}\n", termination=termination)
    assert finished.returncode == RETURN_VALUE_EXIT_CODE
    assert termination.read_text() == '{"checkpoint_step": 20}'


def test_the_runner_reports_where_no_termination_file_can_be_written(tmp_path: Path) -> None:
    finished = run_member("def result():\n    return object()\n", termination=tmp_path / "no" / "such" / "dir")
    assert finished.returncode == RETURN_VALUE_EXIT_CODE and b"not JSON-serializable" in finished.stderr


def test_the_runner_is_python_3_8() -> None:
    ast.parse(inspect.getsource(function_call), feature_version=(3, 8))


def test_an_argument_that_cannot_be_pickled_is_named() -> None:
    with pytest.raises(CallError) as positional:
        function_call.encode_call("def f(a, b): pass\n", "f", [1, lambda: 2], {})
    assert positional.value.argument == "op_args[1]"
    with pytest.raises(CallError) as keyword:
        function_call.encode_call("def f(**k): pass\n", "f", [], {"lock": __import__("threading").Lock()})
    assert keyword.value.argument == "op_kwargs['lock']" and "cannot be sent to the members" in str(keyword.value)


def test_a_call_too_long_for_one_command_line_argument_is_refused() -> None:
    noise = os.urandom(100_000).hex()  # incompressible
    with pytest.raises(CallError, match="one command-line argument holds at most 120000"):
        function_call.encode_call("def f(x): pass\n", "f", [noise], {})


def test_the_call_round_trips() -> None:
    encoded = function_call.encode_call("def f(x, y=1): pass\n", "f", (3,), {"y": (1, 2)})
    assert function_call.decode_call(encoded) == {
        "source": "def f(x, y=1): pass\n",
        "name": "f",
        "args": [3],
        "kwargs": {"y": (1, 2)},
    }


@pytest.mark.parametrize(
    ("log", "said"),
    [
        pytest.param("training...\nloss 0.1\n", "holds no return value line", id="missing"),
        pytest.param("", r"its last log line: '\(empty\)'", id="empty"),
        pytest.param(f'{MARKER}{{"loss": 0.\n', "is not JSON", id="cut"),
        pytest.param(f'{MARKER}{{"loss"other output: 1}}\n', "is not JSON", id="mixed"),
        pytest.param(f'{MARKER}"{"x" * MAX_RETURN_VALUE_BYTES}"\n', "at most 1048576", id="too-large"),
    ],
)
def test_a_return_value_line_that_cannot_be_read_is_refused(log: str, said: str) -> None:
    with pytest.raises(ReturnValueError, match=said):
        function_call.read_return_value(log)


def test_the_last_marked_line_wins_and_is_left_out_of_the_copied_log() -> None:
    log = f"start\n{MARKER}1\n\n{MARKER}{json.dumps({'a': 1})}\n"
    assert function_call.read_return_value(log) == {"a": 1}
    assert function_call.without_return_value(log) == "start\n"
    assert function_call.without_return_value(f"{MARKER}1\nafter\n") == "after\n"
