"""``state.terminated.message``: what a container wrote to its ``terminationMessagePath``.

As the kubelet does (``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``getTerminationMessage``
and ``readLastStringFromContainerLogs``, limits from ``pkg/kubelet/container/runtime.go``,
https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/):

- the message is the file at the container's ``terminationMessagePath`` (default
  ``/dev/termination-log``), its last 4096 bytes (``MaxContainerTerminationMessageLength``);
- with ``terminationMessagePolicy: FallbackToLogsOnError``, a container that exited non-zero and
  left the file empty or absent gets the end of its log instead: the last 80 lines
  (``MaxContainerTerminationMessageLogLines``), at most their last 2048 bytes
  (``MaxContainerTerminationMessageLogLength``);
- the status manager then cuts every container's message of the pod to 12 KiB divided by the number
  of containers (``MaxPodTerminationMessageLogLength``, ``status_manager.go`` ``normalizeStatus``).

Where the "file" is:

- **local process**: a process has no private mount, so each container gets its own file
  (:func:`termination_file`, under the runtime's directory) and learns it two ways: the variable
  ``GANG_SIM_TERMINATION_MESSAGE_PATH`` (:data:`PATH_VARIABLE`), and every ``env`` value equal to the
  container's ``terminationMessagePath`` - and every occurrence of that whole path inside
  ``command`` / ``args`` - is rewritten to that file. So a pod that passes its path in an env variable (or writes
  ``> /dev/termination-log`` in a shell command) works unchanged.
- **simulated container**: the pod annotation ``sim.gang.dev/termination-message`` is what every
  container wrote (:mod:`.simulated_runtime`); absent = the file stayed empty.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.controllers.kubelet import simulated_runtime

Obj = dict[str, Any]

DEFAULT_PATH = "/dev/termination-log"
PATH_VARIABLE = "GANG_SIM_TERMINATION_MESSAGE_PATH"
"""Set in every local-process container: the file standing in for its ``terminationMessagePath``."""
FALLBACK_TO_LOGS_ON_ERROR = "FallbackToLogsOnError"
MAX_MESSAGE_BYTES = 4 * 1024
MAX_LOG_MESSAGE_BYTES = 2 * 1024
MAX_LOG_MESSAGE_LINES = 80
MAX_POD_MESSAGE_BYTES = 12 * 1024

FileText = Callable[[str], str | None]
"""``file_text(container_name)``: what the container's termination file holds (None: no file)."""
LogTail = Callable[[str, int], str]
"""``log_tail(container_name, lines)``: the last ``lines`` lines of the container's log."""


def message_path(container: Obj) -> str:
    return str(container.get("terminationMessagePath") or DEFAULT_PATH)


def termination_file(directory: Path, uid: str, container: str) -> Path:
    """The local-process stand-in for one container's ``terminationMessagePath``."""
    return directory / "termination" / uid / container / "termination-log"


def rewrite_env(env: dict[str, str], container: Obj, file: Path) -> dict[str, str]:
    """``env`` with every value equal to the container's path pointing at ``file``, plus
    :data:`PATH_VARIABLE`."""
    path = message_path(container)
    rewritten = {name: (str(file) if value == path else value) for name, value in env.items()}
    rewritten[PATH_VARIABLE] = str(file)
    return rewritten


def rewrite_command(command: list[str], container: Obj, file: Path) -> list[str]:
    """``command`` with every occurrence of the container's path replaced by ``file`` (a whole path:
    not one followed by more path characters, so ``/dev/termination-log2`` stays)."""
    whole_path = re.compile(re.escape(message_path(container)) + r"(?![\w./-])")
    return [whole_path.sub(lambda _: str(file), word) for word in command]


def read_tail(file: Path, limit: int = MAX_MESSAGE_BYTES) -> str | None:
    """The last ``limit`` bytes of ``file`` (``tail.ReadAtMost``), None when it does not exist."""
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"Error on reading termination log {file}: {error}"
    return data[-limit:].decode(errors="replace")


def container_message(container: Obj, exit_code: int, file_text: str | None, log_tail: Callable[[int], str]) -> str:
    """The termination message of one exited container (module docstring)."""
    text = "" if file_text is None else file_text.encode()[-MAX_MESSAGE_BYTES:].decode(errors="replace")
    fallback = container.get("terminationMessagePolicy") == FALLBACK_TO_LOGS_ON_ERROR and exit_code != 0
    if text or not fallback:
        return text
    return log_tail(MAX_LOG_MESSAGE_LINES).encode()[-MAX_LOG_MESSAGE_BYTES:].decode(errors="replace")


def fill(pod: Obj, statuses: list[Obj], file_text: FileText, log_tail: LogTail) -> list[Obj]:
    """Set ``state.terminated.message`` of every terminated entry of ``statuses`` (in place, also
    returned), then apply the per-pod limit."""
    containers = {container["name"]: container for container in (pod.get("spec") or {}).get("containers") or []}
    per_container = MAX_POD_MESSAGE_BYTES // max(1, len(statuses))
    for status in statuses:
        name = status["name"]
        if (status.get("state") or {}).get("terminated") is None or name not in containers:
            continue
        terminated = dict(status["state"]["terminated"])
        status["state"] = {"terminated": terminated}
        message = container_message(
            containers[name], int(terminated.get("exitCode", 0)), file_text(name), functools.partial(log_tail, name)
        )
        if terminated.get("message") and message:
            message = f"{terminated['message']}: {message}"
        elif terminated.get("message"):
            message = str(terminated["message"])
        message = message.encode()[:per_container].decode(errors="ignore")
        if message:
            terminated["message"] = message
        else:
            terminated.pop("message", None)
    return statuses


def fill_for(pod: Obj, statuses: list[Obj], *, store: Any, processes: Any) -> list[Obj]:
    """:func:`fill` with the pod's runtime: a local-process pod's files (``processes``, a
    ``ProcessRuntime`` handling it) or the simulated annotation; logs from ``store.logs``."""
    metadata = pod["metadata"]
    if processes is not None and processes.handles(pod):
        uid = str(metadata["uid"])

        def file_text(name: str) -> str | None:
            return processes.termination_text(uid, name)  # type: ignore[no-any-return]
    else:
        text = simulated_runtime.termination_message(pod)

        def file_text(name: str) -> str | None:
            return text

    def log_tail(name: str, lines: int) -> str:
        try:
            return str(store.logs.read(metadata["namespace"], metadata["name"], name, tail_lines=lines))
        except ApiError:
            return ""

    return fill(pod, statuses, file_text, log_tail)
