"""The PostgreSQL adapter against a real server (Debian's package: scripts/bootstrap.sh
installs it): initdb into a temporary directory, ``postgres`` on a free port of 127.0.0.1 as
an unprivileged user (postgres refuses to run as root), stopped by its PID."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnchaos.harness.workload.dual_write.connect import open_database
from txnchaos.harness.workload.dual_write.database import DatabaseError
from txnchaos.harness.workload.dual_write.postgres_database import PostgresDatabase
from txnchaos.harness.workload.dual_write.spec import DatabaseSpec

from .db_contract import check_contract


def _bin_dir() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> pwd.struct_passwd | None:
    """The user the server runs as (None: ourselves, when not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    pytest.fail("running as root and no postgres/nobody user to run the server as")


def _as_user(user: pwd.struct_passwd | None) -> dict[str, Any]:
    """Popen arguments that run the child itself as ``user`` (its PID is the server's)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


@pytest.fixture(scope="module")
def postgres_dsn() -> Iterator[str]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed: run scripts/bootstrap.sh")
    user = _run_as()
    # Not under pytest's tmp dirs: their parents are private to root, and the server's user
    # must reach its data directory.
    root = Path(tempfile.mkdtemp(prefix="txnchaos-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if user is not None:
        for p in (root, sock):
            os.chown(p, user.pw_uid, user.pw_gid)
    init = subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", "dw", "-A", "trust"],
        capture_output=True,
        text=True,
        cwd=root,
        **_as_user(user),
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed: {init.stderr}")
    port = _free_port()
    log = (root / "postgres.log").open("wb")
    server = subprocess.Popen(
        [
            str(bin_dir / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"unix_socket_directories={sock}",
            "-c",
            "fsync=off",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
        **_as_user(user),
    )
    dsn = f"host=127.0.0.1 port={port} user=dw dbname=postgres connect_timeout=5"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                PostgresDatabase(dsn).close()
                break
            except DatabaseError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"postgres did not start: {(root / 'postgres.log').read_text()}")
                time.sleep(0.2)
        yield dsn
    finally:
        server.send_signal(signal.SIGINT)  # fast shutdown
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_keeps_the_contract(postgres_dsn: str, tmp_path: Path) -> None:
    db = open_database(DatabaseSpec(kind="postgresql", dsn=postgres_dsn), tmp_path)
    other = PostgresDatabase(postgres_dsn)
    try:
        assert db.kind == "postgresql"
        check_contract(db, other)
    finally:
        db.close()
        other.close()


def test_the_password_never_shows(postgres_dsn: str) -> None:
    db = PostgresDatabase(postgres_dsn + " password=secret")
    try:
        assert "secret" not in db.where
        assert "127.0.0.1" in db.where
    finally:
        db.close()


def test_an_unreachable_server_is_a_clear_error() -> None:
    dsn = f"host=127.0.0.1 port={_free_port()} user=dw dbname=x connect_timeout=2"
    with pytest.raises(DatabaseError, match="cannot connect to PostgreSQL"):
        PostgresDatabase(dsn)
