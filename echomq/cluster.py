"""A Valkey Cluster on loopback from the embedded binary (for tests, demos, local work).

Every key of a queue shares one hash tag, so each transition runs on the one node that owns
the queue's slot; the connectors route by the keys each step declares (``cluster=True`` in
``Connector.connect``). ``LocalCluster`` forms a cluster the way the notes recommend:
explicit bus ports (ephemeral ports are often above 55535, where ``port+10000`` overflows),
``CLUSTER MEET`` with the bus port, slots split evenly, replicas attached, then wait for
``cluster_state:ok`` everywhere and for replicas' links.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import valkey

from .server import EmbeddedServer, ServerError, free_port

SLOTS = 16384


class LocalCluster:
    """``masters`` primaries (+ ``replicas`` per primary), each an ``EmbeddedServer``."""

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 0,
        *,
        native: bool = True,
        node_timeout_ms: int = 1000,
        extra_args: Sequence[str] = (),
    ) -> None:
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs at least one master")
        self.masters = masters
        self.replicas = replicas
        self.native = native
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = list(extra_args)
        self.nodes: list[EmbeddedServer] = []

    @property
    def url(self) -> str:
        """A startup-node URL (the cluster client discovers the rest)."""
        return self.nodes[0].url

    def start(self, timeout: float = 30.0) -> LocalCluster:
        total = self.masters * (1 + self.replicas)
        try:
            for _ in range(total):
                bus = free_port()
                node = EmbeddedServer(
                    ephemeral=True,
                    password="",
                    native=self.native,
                    extra_args=[
                        "--cluster-enabled", "yes",
                        "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", str(self.node_timeout_ms),
                        "--cluster-port", str(bus),
                        "--repl-diskless-sync-delay", "0",
                        *self.extra_args,
                    ],
                )
                node.bus_port = bus  # type: ignore[attr-defined]
                self.nodes.append(node.start())
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def client(self, node: EmbeddedServer) -> Any:
        return valkey.Valkey(host=node.host, port=node.port, decode_responses=True)

    def _form(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        primaries = self.nodes[: self.masters]
        per = SLOTS // self.masters
        for i, node in enumerate(primaries):
            hi = SLOTS - 1 if i == self.masters - 1 else (i + 1) * per - 1
            self.client(node).execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, hi)
        first = self.client(self.nodes[0])
        for node in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", node.host, node.port, node.bus_port)  # type: ignore[attr-defined]
        self._wait(deadline, "every node to know every other", self._all_known)
        ids = [self.client(n).execute_command("CLUSTER", "MYID") for n in primaries]
        for j, node in enumerate(self.nodes[self.masters:]):
            self.client(node).execute_command("CLUSTER", "REPLICATE", ids[j % self.masters])
        self._wait(deadline, "cluster_state:ok", self._all_ok)

    def _all_known(self) -> bool:
        for node in self.nodes:
            text = self.client(node).execute_command("CLUSTER", "NODES")
            lines = [ln for ln in str(text).splitlines() if ln.strip()]
            if len(lines) != len(self.nodes) or "handshake" in text:
                return False
        return True

    def _all_ok(self) -> bool:
        for node in self.nodes:
            if not node.running():
                continue
            c = self.client(node)
            if c.cluster("info").get("cluster_state") != "ok":
                return False
            info = c.info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def _wait(self, deadline: float, what: str, check: Any) -> None:
        while True:
            with contextlib.suppress(valkey.exceptions.ValkeyError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ServerError(f"cluster did not reach {what} in time")
            time.sleep(0.05)

    def wait_ok(self, timeout: float = 15.0) -> None:
        """Wait until every live node reports ``cluster_state:ok`` (after a failover)."""
        self._wait(time.monotonic() + timeout, "cluster_state:ok", self._all_ok)

    def owner(self, key: str) -> EmbeddedServer:
        """The live primary that serves ``key``'s slot."""
        for node in self.nodes:
            if not node.running():
                continue
            c = self.client(node)
            if c.info("replication").get("role") != "master":
                continue
            slot = c.execute_command("CLUSTER", "KEYSLOT", key)
            for lo, hi, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if lo <= slot <= hi and _ and _[0][1] == node.port:
                    return node
        raise ServerError(f"no live primary owns {key!r}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
