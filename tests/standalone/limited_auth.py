"""An auth manager for the UI browser test: Airflow's SimpleAuthManager, plus one user who may read a
single DAG - the DAG-level permission a real auth manager (FAB, Keycloak) gives per role.

SimpleAuthManager grants by role only (``is_authorized_dag`` and ``filter_authorized_dag_ids`` in
``airflow/api_fastapi/auth/managers/simple/simple_auth_manager.py``), so no SimpleAuthManager user can
be limited to one DAG. This subclass answers both questions for :data:`LIMITED_USER` from
``$GANG_READABLE_DAG`` and leaves every other user to SimpleAuthManager. The api-server loads it from
``[core] auth_manager`` (the repository is first on the components' ``PYTHONPATH``). Its tokens are
minted by :func:`mint_token` with the running Airflow's own signer (``BaseAuthManager.generate_jwt``)
in a process with the components' environment, so the secret, audience and issuer are the server's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

LIMITED_USER = "one_dag_viewer"
READABLE_DAG_VARIABLE = "GANG_READABLE_DAG"
CLASS_PATH = f"{__name__}.OneDagAuthManager"


class OneDagAuthManager(SimpleAuthManager):
    """SimpleAuthManager; :data:`LIMITED_USER` reads only ``$GANG_READABLE_DAG`` and changes nothing."""

    @staticmethod
    def _limited(user: Any) -> bool:
        return getattr(user, "username", None) == LIMITED_USER

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if self._limited(user):
            return method == "GET" and details is not None and details.id == os.environ.get(READABLE_DAG_VARIABLE)
        return bool(super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details))

    def filter_authorized_dag_ids(
        self, *, dag_ids: set[str], user: Any, method: Any = "GET", team_name: str | None = None
    ) -> set[str]:
        if self._limited(user):
            readable = os.environ.get(READABLE_DAG_VARIABLE)
            return {dag_id for dag_id in dag_ids if method == "GET" and dag_id == readable}
        found: set[str] = super().filter_authorized_dag_ids(
            dag_ids=dag_ids, user=user, method=method, team_name=team_name
        )
        return found


def mint_token(env: Mapping[str, str], username: str = LIMITED_USER, role: str = "viewer") -> str:
    """A JWT for ``username`` signed as the api-server with ``env`` signs (a child process, ~5 s)."""
    code = (
        "from airflow.api_fastapi.app import get_auth_manager_cls\n"
        "from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser\n"
        f"print(get_auth_manager_cls()().generate_jwt(SimpleAuthManagerUser(username={username!r}, role={role!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=dict(env), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]
