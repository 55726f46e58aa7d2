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

from echomq import native
from echomq.core import errors
from echomq.embedded.server import EmbeddedServer

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
    # a SCAN walks the whole shared server, however few keys match: big pages, few trips
    for raw_key in client.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*",
                                    count=1000):
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


# -- the raw commands, and the refusal check every refusal test runs --------------------

KIND = "EMQKIND job id must be JOB-namespaced"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
FAR = 40_000_000_000_000  # an absolute run-at far in the future (never due in a test)
J1, J2, J3 = "JOB01AAAAAAAAAAAAAAAAAAAAAAA", "JOB01BBBBBBBBBBBBBBBBBBBBBBB", "JOB01CCCCCCCCC"


def k(q: str, name: str) -> str:
    return base(q) + name


def schedule(q: str, job: str, payload: Any = b"p", mode: str = "at", due: Any = FAR) -> tuple:
    return ("EMQ.SCHEDULE", 2, k(q, "job:" + job), k(q, "schedule"), job, payload, mode, due)


def promote(q: str, batch: Any = 100) -> tuple:
    return ("EMQ.PROMOTE", 2, k(q, "schedule"), k(q, "pending"), base(q), batch)


def delay(q: str, job: str, token: Any = "1", mode: str = "at", due: Any = FAR) -> tuple:
    return ("EMQ.DELAY", 3, k(q, "job:" + job), k(q, "active"), k(q, "schedule"),
            job, token, mode, due)


def reschedule(q: str, job: str, mode: str = "at", due: Any = FAR) -> tuple:
    return ("EMQ.RESCHEDULE", 2, k(q, "job:" + job), k(q, "schedule"), job, mode, due)


def enqueue(q: str, job: str, payload: object = b"p") -> tuple:
    return ("EMQ.ENQUEUE", 2, k(q, "job:" + job), k(q, "pending"), job, payload)


def refused(r: valkey.Valkey, q: str, args: tuple, text: str) -> None:
    """``args`` is refused with exactly ``text`` and writes nothing."""
    before = snapshot(r, q)
    reply = send(r, *args)
    assert isinstance(reply, errors.ServerError), reply
    assert reply.text == text
    assert snapshot(r, q) == before


def held(r: valkey.Valkey, q: str, job: str, attempts: str = "1", **extra: str) -> None:
    """A job in hand as a claim leaves it: row active with attempts, id on active."""
    r.hset(k(q, "job:" + job), mapping={"state": "active", "attempts": attempts,
                                        "payload": b"p\x00q", **extra})
    r.zadd(k(q, "active"), {job: FAR})
