"""The AsyncConnector packs commands with libvalkey's C packer (echomq.packing): the same
bytes valkey-py's own asyncio packer sends, and its errors for what cannot be sent."""

from __future__ import annotations

import asyncio

import pytest
import valkey.asyncio as avalkey
from valkey.asyncio.connection import Connection
from valkey.exceptions import DataError

from echomq import AsyncConnector, ids, jobs, packing

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
