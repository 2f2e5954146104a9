"""A real PostgreSQL server for tests, from Debian's packages, on 127.0.0.1.

``postgres_server()`` runs ``initdb`` into a temporary folder, starts ``postgres`` on a free
port and yields its ``postgres_db`` settings (the block dagster-postgres reads). Postgres refuses to
run as root, so as root the server runs as the ``postgres`` user Debian's package creates.
``find_postgres_bin()`` returns None where no server binaries are installed (tests skip).
"""

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def find_postgres_bin() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    on_path = shutil.which("initdb")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if all((folder / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _as_server_user() -> list[str]:
    """Command prefix that runs as ``postgres`` when we are root (Postgres refuses root)."""
    if os.geteuid() != 0:
        return []
    pwd.getpwnam("postgres")  # KeyError: no postgres user to run the server as
    return ["runuser", "-u", "postgres", "--"]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(
            f"{command[-1]} failed ({done.returncode}): {done.stderr or done.stdout}"
        )


@contextlib.contextmanager
def postgres_server(db_name: str = "dagster") -> Iterator[dict]:
    """Start a throwaway server with database ``db_name``; stop it and remove its data after.

    The data folder is a fresh ``/tmp/pretrain-pg-*`` (pytest's ``tmp_path`` is private to
    root, and the server user must reach its data folder).
    """
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries (Debian package postgresql)")
    prefix = _as_server_user()
    data = Path(tempfile.mkdtemp(prefix="pretrain-pg-"))
    if prefix:
        pw = pwd.getpwnam("postgres")
        os.chown(data, pw.pw_uid, pw.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = f"-h 127.0.0.1 -p {port} -k {data} -c fsync=off"
    log = data / "server.log"
    _run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data / "db"), "-U", "postgres", "-A", "trust"]
    )
    _run(
        [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-o", options, "-l", str(log),
         "-w", "-t", "60", "start"]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            probe = subprocess.run(
                [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                capture_output=True,
            )
            if probe.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections: {log.read_text()}")
            time.sleep(0.2)
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{db_name}"')
        conn.close()
        yield {
            "hostname": "127.0.0.1",
            "port": port,
            "username": "postgres",
            "db_name": db_name,
            # SQLAlchemy 2.1 maps plain postgresql:// to psycopg 3; dagster-postgres ships psycopg2
            "scheme": "postgresql+psycopg2",
        }
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-m", "fast", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(data, ignore_errors=True)
