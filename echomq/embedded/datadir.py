"""The embedded server's data directory: who may read it, and the record that names its server.

The data dir holds everything a persistent embedded server keeps: the AOF (every payload),
``valkey.log``, and ``echomq-server.json``, the record through which any process finds the
running server (its URL carries the password). So the dir is ``0700`` and every file in it
``0600`` whatever the umask; a dir that another user can write (or that belongs to another
user) is refused, because whoever can write it can plant a record pointing at their own
server and read every job sent there.

The record outlives the server on purpose: after ``echomq server stop`` it keeps the port and
the password (``pid`` set to ``None``), so the next start reuses both and clients that were
connected before (a dashboard, a worker) reconnect without being told anything new.
``locked`` serialises find-or-start across processes (``flock`` on ``echomq-server.lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import stat
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from echomq.core.errors import ConfigError

RECORD = "echomq-server.json"
LOCK = "echomq-server.lock"
DIR_MODE = 0o700
FILE_MODE = 0o600


def default() -> pathlib.Path:
    """Where the persistent embedded server keeps its data (``$ECHOMQ_DATA`` overrides)."""
    env = os.environ.get("ECHOMQ_DATA")
    if env:
        return pathlib.Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return pathlib.Path(xdg) / "echomq"


def secure(path: str | os.PathLike[str]) -> pathlib.Path:
    """Create ``path`` (``0700``) or check it, then tighten what is in it to ``0600``.

    Raises ``ConfigError`` when the dir belongs to another user or other users can write
    it (nothing is changed then). An existing dir of ours that others can only read
    (``0755``, what older versions made) is tightened to ``0700``.
    """
    path = pathlib.Path(path)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=DIR_MODE, parents=True)
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"data dir {path} is not a directory")
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"data dir {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
            "choose your own with --data-dir or $ECHOMQ_DATA"
        )
    if st.st_mode & 0o022:
        raise ConfigError(
            f"data dir {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}): "
            "anyone who can write it can redirect your jobs to their server. "
            f"Run `chmod 700 {path}` or choose another with --data-dir or $ECHOMQ_DATA"
        )
    if stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    _tighten(path)
    return path


def _tighten(path: pathlib.Path, depth: int = 0) -> None:
    """Files ``0600`` and subdirs (``appendonlydir``) ``0700``; symlinks are left alone."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if depth == 0:
                    _chmod(entry.path, DIR_MODE)
                    _tighten(pathlib.Path(entry.path), depth + 1)
            elif entry.is_file():
                _chmod(entry.path, FILE_MODE)


def _chmod(path: str, mode: int) -> None:
    with contextlib.suppress(OSError):  # not ours to change (or gone): secure() checked the dir
        if stat.S_IMODE(os.lstat(path).st_mode) != mode:
            os.chmod(path, mode)


def private_file(path: pathlib.Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """Open ``path`` as a ``0600`` file whatever the umask (an fd)."""
    fd = os.open(path, flags | os.O_NOFOLLOW, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


@contextlib.contextmanager
def locked(path: pathlib.Path) -> Iterator[None]:
    """Hold the data dir's lock (one find-or-start at a time across processes)."""
    fd = private_file(path / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def redact(url: str) -> str:
    """``url`` without its password (for logs and status lines)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True, slots=True)
class Record:
    """What ``echomq-server.json`` says about a data dir's server.

    ``pid`` is ``None`` once the server was stopped; ``started_at`` is the host's wall
    clock (epoch seconds) when it was started; ``url`` includes the password.
    """

    url: str
    pid: int | None
    host: str
    port: int | None
    unix_socket: str | None
    password: str
    durability: str
    started_at: float | None
    data_dir: str

    @property
    def public_url(self) -> str:
        return redact(self.url)

    def stopped(self) -> Record:
        return Record(**{**asdict(self), "pid": None, "started_at": None})


def read(path: pathlib.Path) -> Record | None:
    """The record in data dir ``path`` (``None`` when absent or unreadable)."""
    try:
        data: dict[str, Any] = json.loads((path / RECORD).read_text())
        return Record(
            url=str(data["url"]), pid=int(data["pid"]) if data.get("pid") else None,
            host=str(data.get("host", "127.0.0.1")),
            port=int(data["port"]) if data.get("port") else None,
            unix_socket=data.get("unix_socket") or None, password=str(data.get("password", "")),
            durability=str(data.get("durability", "everysec")),
            started_at=float(data["started_at"]) if data.get("started_at") else None,
            data_dir=str(data.get("data_dir", path)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(path: pathlib.Path, record: Record) -> None:
    """Replace the record atomically (a ``0600`` temp file renamed over it)."""
    tmp = path / f".{RECORD}.{os.getpid()}"
    fd = private_file(tmp)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(record), f, indent=1)
    os.replace(tmp, path / RECORD)


def pid_alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not count: a dead daemon nobody reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat_line = pathlib.Path(f"/proc/{pid}/stat").read_text()
        return stat_line.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has exited; ``False`` when it still runs after ``timeout`` s
    (monotonic clock)."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
