"""Helpers the native tests share (no tests here): a module-loaded server, key snapshots.

The server loads ``echomq.native.module_path()`` explicitly (``native=False`` plus
``loadmodules``), so these tests say which build they exercise: the packaged one, or the
one ``ECHOMQ_NATIVE_MODULE`` names (an ASan build under scripts/native-asan.sh).
"""

from __future__ import annotations

import os
import pathlib
import re
import uuid
from collections.abc import Sequence
from typing import Any

import valkey

from echomq import errors, native
from echomq.server import EmbeddedServer

# a stock Redis 7 (Debian: apt-get install redis-server); the ASan script points at a wrapper
REDIS7 = pathlib.Path(os.environ.get("ECHOMQ_REDIS_SERVER", "/usr/bin/redis-server"))
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def start_server(
    *,
    binary: str | None = None,
    data_dir: str | pathlib.Path | None = None,
    module: bool = True,
    extra_args: Sequence[str] = (),
    password: str | None = None,
) -> EmbeddedServer:
    """A real server with the EMQ module loaded (``module=False``: without it).

    ``data_dir`` set: persistent (AOF on); otherwise ephemeral.
    """
    mods = [str(native.module_path())] if module else []
    srv = EmbeddedServer(
        ephemeral=data_dir is None,
        data_dir=data_dir,
        native=False,
        loadmodules=mods,
        extra_args=list(extra_args),
        binary=binary,
        password=password,
    )
    return srv.start()


def fresh_queue() -> str:
    return "n" + uuid.uuid4().hex[:12]


def base(queue: str) -> str:
    return f"emq:{{{queue}}}:"


def snapshot(client: valkey.Valkey, queue: str) -> dict[str, tuple[str, Any]]:
    """Every key of ``queue`` (name relative to the queue base) -> (TYPE, content)."""
    prefix = base(queue)
    out: dict[str, tuple[str, Any]] = {}
    for raw_key in client.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*"):
        key = raw_key.decode()
        kind = client.type(key).decode()
        content: Any
        if kind == "hash":
            content = {k.decode(): v for k, v in client.hgetall(key).items()}
        elif kind == "zset":
            content = {m.decode(): s for m, s in client.zrange(key, 0, -1, withscores=True)}
        elif kind == "list":
            content = client.lrange(key, 0, -1)
        elif kind == "string":
            content = client.get(key)
        elif kind == "set":
            content = client.smembers(key)
        else:
            content = None
        out[key[len(prefix):]] = (kind, content)
    return out


def send(client: valkey.Valkey, *args: Any) -> Any:
    """Send one command; a refusal is returned (as ``errors.ServerError``) instead of raised.

    The text is the server's exactly: valkey-py drops a leading ``ERR ``, so it is put back.
    """
    try:
        return client.execute_command(*args)
    except valkey.exceptions.ResponseError as exc:
        text = str(exc)
        if not _CODE.match(text.split(" ", 1)[0]):
            text = "ERR " + text
        return errors.from_server(text)


def server_ms(client: valkey.Valkey) -> int:
    secs, micros = client.time()
    return int(secs) * 1000 + int(micros) // 1000
