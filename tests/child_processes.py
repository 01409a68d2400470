"""The environment of a Python child process a test starts from the repository (a worker, a bench):
the repository first on ``PYTHONPATH`` so ``tests.*`` and ``demo`` import, then the caller's own path
(where ``gang_sim`` is found when it is not installed)."""

from __future__ import annotations

import os
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


def child_environment() -> dict[str, str]:
    """This process's environment with the repository put first on ``PYTHONPATH``."""
    search_path = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": search_path}
