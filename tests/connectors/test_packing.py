"""The AsyncConnector packs commands with libvalkey's C packer (echomq.connectors.packing): the same
bytes valkey-py's own asyncio packer sends, and its errors for what cannot be sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import valkey.asyncio as avalkey
from valkey.asyncio.connection import Connection
from valkey.exceptions import DataError

from echomq import AsyncConnector
from echomq.connectors import packing
from echomq.core import errors, ids
from echomq.verbs import jobs

CASES = [
    ("EVALSHA", "a" * 40, 1, "emq:{q}:pending", "emq:{q}:", "JOB" + "0" * 26, b'{"x":1}'),
    ("CONFIG GET", "maxmemory"),           # a name with its subcommand is split
    (b"CLIENT SETNAME", b"n"),
    ("SET", "ké", b"\xff\x00", -3, 10**20, 1.5, 1e20, memoryview(b"mv")),
    ("ZADD", "z", *[x for i in range(3000) for x in (i, f"m{i}")]),  # past the buffer cutoff
]


def test_c_packed_connections_send_valkey_py_bytes():
    fast = packing._c_packing(Connection)()
    slow = Connection()
    assert type(fast).__name__ == "CPackedConnection"
    for args in CASES:
        assert b"".join(fast.pack_command(*args)) == b"".join(slow.pack_command(*args))
    commands = [("PING",), CASES[0], CASES[4]]  # a pipeline packs through pack_command too
    assert b"".join(fast.pack_commands(commands)) == b"".join(slow.pack_commands(commands))
    for bad in (None, True, object()):
        with pytest.raises(DataError, match="Invalid input of type"):
            fast.pack_command("SET", "k", bad)


def test_async_connector_packs_in_c_unless_the_pool_encodes_otherwise(server):
    async def main() -> None:
        conn = await AsyncConnector.connect(server.url)
        cls = conn.client.connection_pool.connection_class
        assert cls.__name__.startswith("CPacked") and issubclass(cls, Connection)
        jid = ids.mint()
        assert await jobs.enqueue_many(conn, "packq", [(jid, "é")]) == ["enqueued"]
        assert (await conn.call("HGET", f"emq:{{packq}}:job:{jid}", "payload")) == "é".encode()
        await conn.close()
        latin = avalkey.Valkey.from_url(server.url, encoding="latin-1")
        packing.use_c_packer(latin.connection_pool)  # a str would not go out as UTF-8
        assert latin.connection_pool.connection_class is Connection
        await latin.aclose()

    asyncio.run(main())


def test_a_cluster_async_connector_packs_in_c_on_every_node(cluster):
    async def main() -> None:
        conn = await AsyncConnector.connect(cluster.url)
        items = [(ids.mint(), b"p") for _ in range(jobs.CHUNK + 1)]
        assert await jobs.enqueue_many(conn, "packc", items) == ["enqueued"] * len(items)
        nodes = conn.client.get_nodes()
        assert nodes and all(n.connection_class.__name__.startswith("CPacked") for n in nodes)
        used = [c for n in nodes for c in n._connections]
        assert used and all(type(c).__name__.startswith("CPacked") for c in used)
        await conn.close()

    asyncio.run(main())


def test_buffered_replies_are_read_without_a_timer_and_a_waiting_read_keeps_its_timeout(server):
    """valkey-py arms a socket-timeout timer for every reply it reads; the AsyncConnector's
    connections arm one only for a read that has to wait for the socket. Replies, a refusal
    among them, and the timeout of a read that waits too long stay as before."""
    async def main() -> None:
        conn = await AsyncConnector.connect(server.url)
        await conn.call("SET", "emq:{packbad}:pending", "not a set")  # enqueue there: WRONGTYPE
        await jobs.enqueue(conn, "packt", ids.mint(), b"warm")  # script loaded, connection open
        loop = asyncio.get_running_loop()
        timers = 0
        call_at = loop.call_at

        def counting(when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:
            nonlocal timers
            timers += 1
            return call_at(when, callback, *args, **kw)

        loop.call_at = counting  # type: ignore[method-assign]
        calls = [jobs.enqueue(conn, "packt", ids.mint(), b"p") for _ in range(100)]
        calls.insert(50, jobs.enqueue(conn, "packbad", ids.mint(), b"p"))
        got = await asyncio.gather(*calls, return_exceptions=True)
        loop.call_at = call_at  # type: ignore[method-assign]
        refused = got.pop(50)
        assert isinstance(refused, errors.ServerError) and str(refused).startswith("WRONGTYPE")
        assert got == ["enqueued"] * 100
        assert await conn.call("ZCARD", "emq:{packt}:pending") == 101
        # one timer per read that waited for the socket, not one per reply (101 before)
        assert timers < 30, timers
        await conn.close()

        slow = await AsyncConnector.connect(server.url, socket_timeout=0.2)
        with pytest.raises(errors.WireError, match="Timeout reading"):
            await slow.call("BLPOP", "emq:{packt}:nothing", 2)
        assert await jobs.enqueue(slow, "packt", ids.mint(), b"p") == "enqueued"  # reconnects
        await slow.close()

    asyncio.run(main())


def test_a_buffered_reply_ends_as_valkey_py_would_end_it(server):
    """Each kind of reply already in the reader's buffer (a value, a refusal, a refusal
    valkey-py maps to a lost connection, bytes that are not RESP) gives the same result or
    exception on an AsyncConnector's connection as on valkey-py's own, and leaves the
    connection open or dropped alike."""
    buffered = [b":7\r\n", b"*2\r\n$1\r\na\r\n:2\r\n", b"-WRONGTYPE wrong kind\r\n",
                b"-ERR max number of clients reached\r\n", b"?not resp\r\n"]

    pool = avalkey.ConnectionPool.from_url(server.url)

    async def outcome(cls: type, data: bytes) -> tuple[str, bool]:
        conn = cls(**pool.connection_kwargs)
        await conn.connect()
        conn._parser._reader.feed(data)
        try:
            got = repr(await conn.read_response())
        except Exception as exc:  # the outcome compared, whatever it is
            got = f"{type(exc).__name__}: {exc}"
        connected = conn.is_connected
        await conn.disconnect()
        return got, connected

    async def main() -> None:
        fast = packing._c_packing(pool.connection_class)
        for data in buffered:
            assert await outcome(fast, data) == await outcome(pool.connection_class, data), data

    asyncio.run(main())
