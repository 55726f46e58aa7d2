"""Plain clients and reads on a test server: a client for any URL (cluster ones included),
a verb runner for either connector kind, a queue's keys as data, the server's clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import valkey

from echomq import AsyncConnector, Connector, native

# the wires a verb test runs on: 6 (the EMQ module's commands) only where the module is built
WIRES = [4, 6] if native.available() else [4]


def client_for(url: str) -> Any:
    """A plain client for ``url``: ``Valkey``, or ``ValkeyCluster`` for a cluster URL
    (it routes each key to its slot's owner and scans every primary)."""
    from valkey.cluster import ClusterNode, ValkeyCluster

    from echomq.connectors import urls
    target = urls.parse(url)
    if not target.cluster:
        return valkey.Valkey.from_url(url)
    nodes = [ClusterNode(h, p) for h, p in target.nodes[1:]]
    return ValkeyCluster.from_url(target.url, startup_nodes=nodes)


class Runner:
    """Runs a verb on one connector kind; async verbs are awaited on a private loop."""

    def __init__(self, kind: str, url: str, wire: int = 4) -> None:
        self.kind = kind
        self.wire = wire
        self.loop: asyncio.Runner | None = None
        if kind == "sync":
            self.conn: Any = Connector.connect(url, wire=wire)
        else:
            self.loop = asyncio.Runner()
            self.conn = self.loop.run(AsyncConnector.connect(url, wire=wire))

    def __call__(self, verb: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = verb(self.conn, *args, **kwargs)
        if self.loop is not None:
            return self.loop.run(result)
        return result

    def close(self) -> None:
        if self.loop is not None:
            self.loop.run(self.conn.close())
            self.loop.close()
        else:
            self.conn.close()


def snapshot(client: valkey.Valkey, queue: str) -> dict[bytes, Any]:
    """Every key of ``queue`` with its type and full content, for "nothing written" checks."""
    out: dict[bytes, Any] = {}
    for key in client.scan_iter(match=f"emq:{{{queue}}}:*", count=1000):
        kind = client.type(key)
        if kind == b"hash":
            value: Any = client.hgetall(key)
        elif kind == b"zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            value = client.lrange(key, 0, -1)
        elif kind == b"set":
            value = client.smembers(key)
        else:
            value = client.dump(key)
        out[key] = (kind, value)
    return out


def server_ms(client: valkey.Valkey) -> int:
    secs, micros = client.time()
    return int(secs) * 1000 + int(micros) // 1000
