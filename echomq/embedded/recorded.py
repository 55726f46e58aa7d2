"""The implicit server of a data dir, found through its record (``echomq.embedded.datadir``):
``find``, ``find_or_start`` (started detached when none answers), ``stop_recorded``, whether
a recorded server answers or still runs, and what ``echomq server status`` shows. Waits are
on the HOST monotonic clock. ``EmbeddedServer.find``/``find_or_start``/``stop_recorded`` are
these."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from echomq.embedded import datadir
from echomq.embedded.datadir import Record
from echomq.embedded.launch import (
    ServerError,
    admin,
    check_durability,
    default_data_dir,
    port_in_use,
)

log = logging.getLogger("echomq.server")


class Startable(Protocol):
    """What ``find_or_start`` needs of a server it starts (``EmbeddedServer`` is one)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def public_url(self) -> str: ...

    def start(self, timeout: float = ..., *, detach: bool = ...) -> Any: ...

    def record(self) -> Record: ...


def answers(record: Record) -> bool:
    """The recorded server is alive: its pid runs, and the URL answers as that pid."""
    if record.pid is None or not datadir.pid_alive(record.pid):
        return False
    try:
        client = admin(record.url)
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


def find(data_dir: str | os.PathLike[str] | None = None) -> Record | None:
    """The live server recorded for ``data_dir`` (default: ``default_data_dir()``), or
    ``None``. Refuses (``ConfigError``) a data dir other users can write."""
    path = _existing(data_dir)
    if path is None:
        return None
    with datadir.locked(path):
        found = datadir.read(path)
        return found if found is not None and answers(found) else None

def find_or_start(
    cls: Callable[..., Startable],
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

def stop_recorded(
    data_dir: str | os.PathLike[str] | None = None, timeout: float = 10.0
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
            terminate(found.pid, timeout)
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


def terminate(pid: int, timeout: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not datadir.wait_gone(pid, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        datadir.wait_gone(pid, 5)


def _raise_durability(found: Record, path: pathlib.Path) -> Record:
    client = admin(found.url)
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
    client = admin(record.url)
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
