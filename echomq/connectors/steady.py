"""The cluster clients, steadied: a failing primary costs its own shard, not every
shard's connections, and one topology refresh per ``REFRESH_MIN_S``.

What valkey-py's asyncio ``ValkeyCluster`` does when one node's connection fails: it
closes the connections of every node (``_reset_for_reinitialize``), so every command in
flight on the healthy primaries fails with it, and the next command of any caller waits,
under one lock, for a full topology refresh (``CLUSTER SLOTS`` from the startup nodes, then
``COMMAND``). Until the failed primary's replica is promoted, the topology still names the
dead node, so every call routed there fails again and resets again: a worker pool spread
over six queues fell from about 657 to 22 jobs/s on the two healthy primaries while one
primary failed over (the failover drill, ``tests/e2e/test_failover_drill.py``).

``SteadyCluster`` changes three things and nothing else:

- a lost node asks for a refresh (the flag) without closing any connection: the healthy
  nodes' connections, and the commands in flight on them, carry on;
- a refresh keeps the node objects (and their open connections) of the nodes that are still
  there (``SteadyNodes``); only a node the new topology no longer names is disconnected;
- refreshes are at most one per ``REFRESH_MIN_S`` (a dead primary's callers ask for one on
  every call until its replica is promoted), and ``COMMAND`` is read once, at the first
  connect (the command table does not change with the topology).

A call routed to the failed primary still fails (``ConnectionError``, then ``WireError``
in the connector): that queue's consumers degrade and recover on their own, as before.

The sync ``ValkeyCluster`` already keeps the healthy nodes' connections through a refresh
(a node still named keeps its object); what it lacks is the bound: every call that fails
on the dead primary refreshes the topology at once, in the caller's thread, until the
promotion. ``SteadySyncCluster`` refreshes at most once per ``REFRESH_MIN_S`` too
(``SteadySyncNodes``); a producer's call retried through the failover
(``App(retry_for=)``) finds the promoted replica at the first refresh after it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from valkey import cluster as vcluster
from valkey.asyncio import cluster as avcluster
from valkey.exceptions import ValkeyClusterException

#: the shortest span (HOST monotonic seconds) between two topology refreshes
REFRESH_MIN_S = 0.25


class SteadyNodes(avcluster.NodesManager):
    """A ``NodesManager`` whose refresh keeps the nodes it already had."""

    __slots__ = ()

    def set_nodes(self, old: dict[str, Any], new: dict[str, Any],
                  remove_old: bool = False) -> None:
        if old is self.nodes_cache:
            # the refresh made a fresh node object for every node; a node still there keeps
            # its object (and its open connections), re-typed if it was promoted
            kept: dict[int, Any] = {}
            for name, node in list(new.items()):
                prev = old.get(name)
                if prev is not None and prev is not node:
                    prev.server_type = node.server_type
                    new[name] = prev
                    kept[id(node)] = prev
            if kept:  # the slot table (set just before this call) points at the kept ones
                for nodes in {id(v): v for v in self.slots_cache.values()}.values():
                    nodes[:] = [kept.get(id(n), n) for n in nodes]
        super().set_nodes(old, new, remove_old)


class SteadyCluster(avcluster.ValkeyCluster):
    """``valkey.asyncio.cluster.ValkeyCluster`` that spares the healthy shards while one
    fails over (see the module docstring)."""

    __slots__ = ("_refreshed_at",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.nodes_manager.__class__ = SteadyNodes
        self._refreshed_at = 0.0

    async def _reset_for_reinitialize(self) -> None:
        # ask for a refresh; leave every connection open (the failed one fails by itself)
        self._initialize = True

    async def initialize(self) -> SteadyCluster:
        if self._closed:
            raise ValkeyClusterException("ValkeyCluster is closed")
        if not self._initialize:
            return self
        if not self._lock:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._closed:
                raise ValkeyClusterException("ValkeyCluster is closed")
            if not self._initialize:
                return self
            first = not getattr(self.commands_parser, "commands", None)
            if not first and time.monotonic() - self._refreshed_at < REFRESH_MIN_S:
                self._initialize = False  # refreshed a moment ago: route by what it knows
                return self
            try:
                await self.nodes_manager.initialize()
                if first:
                    await self.commands_parser.initialize(self.nodes_manager.default_node)
                else:  # a live node for the parser's rare COMMAND GETKEYS
                    self.commands_parser.node = self.nodes_manager.default_node
                self._initialize = False
            except BaseException:
                if first:  # nothing known yet: as the stock client, close and raise
                    await self.nodes_manager.aclose()
                    await self.nodes_manager.aclose("startup_nodes")
                raise
            finally:
                self._refreshed_at = time.monotonic()
        return self


class SteadySyncNodes(vcluster.NodesManager):
    """The sync ``NodesManager``, its topology refreshes at most one per ``REFRESH_MIN_S``
    (HOST monotonic) once it knows a slot table; ``refreshes`` counts the ones made."""

    refreshes = 0

    def initialize(self) -> None:
        last = getattr(self, "_refreshed_at", None)
        if (last is not None and self.slots_cache
                and time.monotonic() - last < REFRESH_MIN_S):
            return  # refreshed a moment ago: route by what it knows
        try:
            self.refreshes += 1
            super().initialize()  # type: ignore[no-untyped-call]
        finally:
            self._refreshed_at = time.monotonic()


class SteadySyncCluster(vcluster.ValkeyCluster):
    """``valkey.cluster.ValkeyCluster`` whose failing primary costs one topology refresh
    per ``REFRESH_MIN_S``, not one per call (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # the first refresh, at connect: unbounded
        self.nodes_manager.__class__ = SteadySyncNodes
