"""The services a production Airflow stands on, from Debian's packages: PostgreSQL and Redis.

- :class:`Postgres`: a new cluster (``initdb``) in a temporary directory, served by ``postgres`` on
  127.0.0.1 and a free port, no Unix socket; the metadata database of Airflow (database ``postgres``,
  superuser ``airflow``, ``trust`` authentication on loopback only). PostgreSQL refuses to run as
  root, so as root both run as the Debian package's system user ``postgres`` (``Popen(user=...)``);
  as anyone else, as that user. ``fsync=off`` only: a SIGKILLed server loses nothing committed (the
  WAL is written at every commit, ``synchronous_commit`` stays on), it just is not safe against a
  machine crash, which the tests never cause. :meth:`Postgres.kill` and :meth:`Postgres.start` are
  the restart of the kill scenario: the server runs crash recovery on the same data directory.
- :class:`Redis`: ``redis-server`` on 127.0.0.1 and a free port, without persistence (no RDB
  snapshots, no AOF), as the Celery broker.

Binaries: ``/usr/lib/postgresql/<major>/bin`` (package ``postgresql``), ``/usr/bin/redis-server``
(package ``redis-server``); ``.ci/run`` installs both when missing. Each process runs in a session of
its own (:mod:`tests.standalone.processes`) and is stopped by that session only.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from gang_sim.testing.eventually import eventually
from tests.standalone.processes import Started, free_port, start

POSTGRES_ROOT = Path("/usr/lib/postgresql")
REDIS_SERVER = Path("/usr/bin/redis-server")
POSTGRES_USER = "postgres"
"""The system user of Debian's ``postgresql`` package: the server runs as it when the tests run as root."""


def postgres_binaries() -> Path | None:
    """``/usr/lib/postgresql/<newest major>/bin`` if it holds ``initdb`` and ``postgres``, else None."""
    if not POSTGRES_ROOT.is_dir():
        return None
    majors = sorted((path for path in POSTGRES_ROOT.iterdir() if path.name.isdigit()), key=lambda p: int(p.name))
    for major in reversed(majors):
        if (major / "bin" / "initdb").exists() and (major / "bin" / "postgres").exists():
            return major / "bin"
    return None


def missing_services() -> list[str]:
    """The Debian packages whose binaries are missing (empty when both services can start)."""
    missing = []
    if postgres_binaries() is None:
        missing.append("postgresql")
    if not REDIS_SERVER.exists():
        missing.append("redis-server")
    return missing


def accepts_connections(port: int) -> bool:
    """True if something accepts a TCP connection on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _server_user() -> str | None:
    """The user the server runs as: ``postgres`` when we are root, else ourselves (None)."""
    return POSTGRES_USER if os.geteuid() == 0 else None


@dataclass
class Postgres:
    """A PostgreSQL cluster in ``directory/postgres`` (see the module docstring)."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: Started | None = None
    starts: int = 0

    @property
    def data(self) -> Path:
        return self.directory / "postgres"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL Airflow's ``[database] sql_alchemy_conn`` takes."""
        return f"postgresql+psycopg2://airflow@127.0.0.1:{self.port}/postgres"

    def initialize(self) -> None:
        """``initdb`` a new cluster (owned by the server's user)."""
        binaries = postgres_binaries()
        assert binaries is not None, "PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)"
        self.data.mkdir(mode=0o700)
        user = _server_user()
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.data, entry.pw_uid, entry.pw_gid)
            # The server's user must reach its data directory through ours (mkdtemp makes it 0700).
            os.chmod(self.directory, 0o711)
        result = subprocess.run(
            [str(binaries / "initdb"), "-D", str(self.data), "-U", "airflow", "--auth=trust", "-E", "UTF8"],
            capture_output=True,
            text=True,
            timeout=180,
            user=user,
            cwd="/",
        )
        assert result.returncode == 0, f"initdb failed:\n{result.stdout}\n{result.stderr}"

    def start(self) -> None:
        """Start the server (again, after :meth:`kill`) and wait until it accepts connections."""
        binaries = postgres_binaries()
        assert binaries is not None
        self.starts += 1
        command = [
            str(binaries / "postgres"),
            "-D",
            str(self.data),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
            "-c",
            "max_connections=300",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
        ]
        log_path = self.directory / f"postgres-{self.starts}.log"
        log_file = log_path.open("wb")
        popen = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            user=_server_user(),
            cwd="/",
        )
        self.process = Started(f"postgres-{self.starts}", popen, log_path, log_file)
        eventually(
            lambda: self._ready(), timeout=120, what=f"PostgreSQL accepting connections on {self.port}", interval=0.5
        )

    def _ready(self) -> bool:
        assert self.process is not None
        assert self.process.running(), f"PostgreSQL exited\n{self.process.describe()}"
        return accepts_connections(self.port) and "ready to accept connections" in self.process.log()

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (a crash of the database server's machine process)."""
        assert self.process is not None
        self.process.kill()
        eventually(lambda: not accepts_connections(self.port), timeout=30, what="PostgreSQL gone", interval=0.2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def describe(self) -> str:
        return "" if self.process is None else self.process.describe()

    def remove(self) -> None:
        shutil.rmtree(self.data, ignore_errors=True)


@dataclass
class Redis:
    """``redis-server`` on 127.0.0.1 without persistence, logging to ``directory/redis.log``."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: Started | None = None

    @property
    def url(self) -> str:
        """The Celery broker URL (``[celery] broker_url``)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [
            str(REDIS_SERVER),
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            "--daemonize",
            "no",
        ]
        self.process = start("redis", command, self.directory / "redis.log")
        started = time.monotonic()
        while not accepts_connections(self.port):
            assert self.process.running(), f"redis-server exited\n{self.process.describe()}"
            assert time.monotonic() - started < 60, f"redis-server not listening\n{self.process.describe()}"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def describe(self) -> str:
        return "" if self.process is None else self.process.describe()
