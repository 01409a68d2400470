"""A ``@task.gang`` function call: sent into every member, run there, rank 0's return value read back.

This module imports only the standard library (and runs on Python 3.8 and later), because the member
runs its very source: the worker (``decorators.gang``) sets the trainer container's ``command`` to
``python3 -c <this module's source>`` and its ``args`` to the path of the container's termination
message and the encoded call (:func:`member_command`). In the member, :func:`main`

1. decodes the call (:func:`encode_call`: the function's source - as ``@task.kubernetes`` sends it,
   the decorator line removed - its name and its arguments, pickled, compressed and base64-encoded
   into one command-line argument of at most :data:`MAX_CALL_CHARACTERS` characters: Linux refuses a
   longer one, ``MAX_ARG_STRLEN`` is 131072 bytes);
2. runs the source in a fresh namespace and calls the function (a coroutine is run with
   ``asyncio.run``); an exception ends the member with its traceback (the function's lines shown)
   and exit code 1 (``sys.exit(n)`` with ``n``), and the gang fails as any gang with a failed member does;
3. on rank 0 only (``GANG_RANK``, set in every member), writes the return value as JSON on one line
   of its log, the last one: :data:`MARKER` followed by the JSON text. Other ranks' return values
   are ignored.

A return value that is not JSON-serializable, or longer than :data:`MAX_RETURN_VALUE_BYTES` (1 MiB)
as JSON, ends rank 0 with exit code :data:`RETURN_VALUE_EXIT_CODE` and the reason on stderr and in
its termination message (when nothing else, e.g. a checkpoint report, is written there).

When the gang succeeded, the worker reads rank 0's log (its last lines, through the pod ``log``
subresource) and takes the last marked line (:func:`read_return_value`): a missing line (rank 0 left
before writing it, e.g. through ``os._exit``), a line that is not JSON (cut or mixed with other
output) or one over the limit raise :class:`ReturnValueError`, which ends the try as
``member_failed``. The marked line is left out of the logs copied into the task log
(:func:`without_return_value`).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import linecache
import os
import pickle
import sys
import traceback
import zlib
from typing import Any

MARKER = "airflow-gang:return-value:v1 "
"""The start of the log line that carries rank 0's return value (JSON follows on the same line)."""
MAX_RETURN_VALUE_BYTES = 1024 * 1024
"""The longest return value, as JSON text (ASCII: one byte per character)."""
RETURN_VALUE_EXIT_CODE = 65
"""Rank 0's exit code when its return value cannot be sent (``EX_DATAERR`` of sysexits.h)."""
MAX_CALL_CHARACTERS = 120_000
"""The longest encoded call: one command-line argument (Linux ``MAX_ARG_STRLEN``, 131072 bytes)."""
RANK_VARIABLE = "GANG_RANK"
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
"""The kubelet's default ``terminationMessagePath``; ``GANG_TERMINATION_MESSAGE_PATH`` (set with a
``checkpoint``) names the container's own."""
PICKLE_PROTOCOL = 4
"""Readable by every Python 3 from 3.4 on, whatever the worker's Python is."""


class CallError(ValueError):
    """The call cannot be sent to the members; ``argument`` names what (``op_args[1]``, ``op_kwargs['x']``)."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(problem)
        self.argument = argument


class ReturnValueError(ValueError):
    """Rank 0's return value cannot be handed on (too large, not JSON, missing, malformed)."""


def encode_call(source: str, name: str, args: Any, kwargs: Any) -> str:
    """The call as one command-line argument; :class:`CallError` names an argument that cannot be
    pickled, or says the call is too long."""
    arguments = list(args)
    keywords = dict(kwargs)
    for label, value in [*((f"op_args[{i}]", v) for i, v in enumerate(arguments)), *_keyword_items(keywords)]:
        try:
            pickle.dumps(value, protocol=PICKLE_PROTOCOL)
        except Exception as error:  # pickle raises PicklingError, TypeError, AttributeError...
            raise CallError(label, f"cannot be sent to the members: {type(error).__name__}: {error}") from error
    call = {"source": source, "name": name, "args": arguments, "kwargs": keywords}
    encoded = base64.b64encode(zlib.compress(pickle.dumps(call, protocol=PICKLE_PROTOCOL), 9)).decode("ascii")
    if len(encoded) > MAX_CALL_CHARACTERS:
        raise CallError(
            "op_kwargs",
            f"the call of {name}() is {len(encoded)} characters encoded; one command-line argument holds at most "
            f"{MAX_CALL_CHARACTERS}: pass large inputs through storage (a path or a URI) instead",
        )
    return encoded


def _keyword_items(keywords: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(f"op_kwargs[{key!r}]", value) for key, value in keywords.items()]


def decode_call(encoded: str) -> dict[str, Any]:
    call: dict[str, Any] = pickle.loads(zlib.decompress(base64.b64decode(encoded)))
    return call


def member_command(encoded: str) -> tuple[list[str], list[str]]:
    """The trainer container's ``command`` and ``args`` that run the call ``encoded``."""
    runner = inspect.getsource(sys.modules[__name__])
    return ["python3", "-c", runner], [TERMINATION_MESSAGE_PATH, encoded]


def encode_return_value(value: Any) -> str:
    """``value`` as the JSON text of its log line; :class:`ReturnValueError` when it cannot be."""
    try:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise ReturnValueError(
            f"rank 0's return value is not JSON-serializable ({error}); return dicts, lists, strings, numbers, "
            "booleans or None"
        ) from error
    if len(text) > MAX_RETURN_VALUE_BYTES:
        raise ReturnValueError(_too_large(len(text)))
    return text


def _too_large(size: int) -> str:
    return (
        f"rank 0's return value is {size} bytes as JSON; @task.gang hands on at most {MAX_RETURN_VALUE_BYTES} "
        "(1 MiB): write large results to storage and return their location"
    )


def read_return_value(log: str) -> Any:
    """Rank 0's return value from its log (the last marked line); :class:`ReturnValueError` when the
    line is missing, over the limit or not JSON."""
    lines = [line for line in log.splitlines() if line.startswith(MARKER)]
    if not lines:
        tail = log.strip().splitlines()[-1:] or ["(empty)"]
        raise ReturnValueError(
            f"rank 0 exited 0 but its log holds no return value line (did the process leave before the "
            f"function returned, e.g. through os._exit?); its last log line: {tail[0][:200]!r}"
        )
    text = lines[-1][len(MARKER) :]
    if len(text.encode("utf-8")) > MAX_RETURN_VALUE_BYTES:
        raise ReturnValueError(_too_large(len(text.encode("utf-8"))))
    try:
        return json.loads(text)
    except ValueError as error:
        raise ReturnValueError(
            f"rank 0's return value line is not JSON ({error}): it was cut or mixed with other output; "
            f"it starts {text[:80]!r}"
        ) from error


def without_return_value(log: str) -> str:
    """``log`` without the return value line (and the empty line written before it)."""
    kept: list[str] = []
    for line in log.splitlines(keepends=True):
        if line.startswith(MARKER):
            if kept and not kept[-1].strip():
                kept.pop()
            continue
        kept.append(line)
    return "".join(kept)


def report(message: str, termination_path: str) -> None:
    """Say why rank 0 ends: on stderr, and in the termination message unless something is there."""
    sys.stderr.write(f"@task.gang: {message}\n")
    sys.stderr.flush()
    path = os.environ.get("GANG_TERMINATION_MESSAGE_PATH") or termination_path
    try:
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            with open(path, "w") as file:
                file.write(f"@task.gang: {message}"[:4000])
    except OSError:  # no termination file here: stderr said it
        pass


def run_call(encoded: str) -> Any:
    """Run the decoded call; its return value (a coroutine's result for an ``async def``)."""
    call = decode_call(encoded)
    source, name = call["source"], call["name"]
    filename = f"<@task.gang {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show lines
    namespace: dict[str, Any] = {"__name__": "__gang_task__"}
    exec(compile(source, filename, "exec"), namespace)
    result = namespace[name](*call["args"], **call["kwargs"])
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return result


def main(argv: list[str]) -> int:
    """The member's program (module docstring): ``argv`` is the termination message path and the call."""
    termination_path, encoded = argv
    try:
        result = run_call(encoded)
    except Exception:  # the interpreter's own report would not show the function's lines (linecache)
        traceback.print_exc()
        return 1
    if os.environ.get(RANK_VARIABLE) != "0":
        return 0
    try:
        text = encode_return_value(result)
    except ReturnValueError as problem:
        report(str(problem), termination_path)
        return RETURN_VALUE_EXIT_CODE
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout.buffer.write(f"\n{MARKER}{text}\n".encode("ascii"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
