"""A throwaway PostgreSQL cluster from Debian's package: ``initdb`` in a temporary
directory, started on a free loopback port, trust authentication, stopped and removed at
the end. As root (CI containers) the server runs as the ``postgres`` user, which
PostgreSQL requires."""

from __future__ import annotations

import contextlib
import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

BIN = pathlib.Path("/usr/lib/postgresql")


def bindir() -> pathlib.Path:
    """The newest installed server's bin directory (``apt-get install postgresql``)."""
    found = sorted((p / "bin" for p in BIN.glob("*") if (p / "bin" / "initdb").exists()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not found:
        raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def cluster() -> Iterator[str]:
    """A started cluster's URL (``postgresql://postgres@127.0.0.1:PORT/postgres``)."""
    bin_ = bindir()
    root = pathlib.Path(tempfile.mkdtemp(prefix="emq-pg-"))
    data, port = root / "data", _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run([*prefix, str(bin_ / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8"], **run)  # type: ignore[call-overload]
    subprocess.run([*prefix, str(bin_ / "pg_ctl"), "-D", str(data), "-w", "-t", "60",
                    "-l", str(root / "log"), "-o",
                    f"-p {port} -h 127.0.0.1 -k {root} -F", "start"],
                   **run)  # type: ignore[call-overload]
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(bin_ / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
