"""The asyncio client's command packer, in C.

valkey-py's sync connections pack a command with libvalkey's C packer; its asyncio
connections pack in Python, one ``Encoder.encode`` and one bytes join per argument. A bulk
admission carries thousands of arguments (``enqueue_many``: two per job), so on an
``AsyncConnector`` packing was about half of a bulk call's wall time. ``use_c_packer(pool)``
(``use_c_packer_cluster(client)`` for a cluster client) makes asyncio connections pack with
the same C packer the sync ones use: the same bytes on the wire (libvalkey encodes str as
UTF-8, int and float as valkey-py does), and an argument the C packer refuses (``None``, a
bool, another type) goes to valkey-py's own packer, which raises its own ``DataError``.
"""

from __future__ import annotations

import codecs
import functools
from typing import Any

from libvalkey import pack_command as _c_pack


@functools.cache
def _c_packing(cls: type) -> type:
    """``cls`` (a valkey-py asyncio connection class) packing commands in C."""
    fallback = cls.pack_command  # type: ignore[attr-defined]

    def pack_command(self: Any, *args: Any) -> list[bytes]:
        head = args[0]
        # as valkey-py: a command name given with its subcommand ("CONFIG GET") is split
        if isinstance(head, str):
            if " " in head:
                args = (*head.encode().split(), *args[1:])
        elif b" " in head:
            args = (*head.split(), *args[1:])
        try:
            return [_c_pack(args)]
        except TypeError:
            return list(fallback(self, *args))

    return type(f"CPacked{cls.__name__}", (cls,), {"pack_command": pack_command})


def _strict_utf8(kwargs: Any) -> bool:
    encoding = codecs.lookup(kwargs.get("encoding", "utf-8")).name
    return encoding == "utf-8" and kwargs.get("encoding_errors", "strict") == "strict"


def use_c_packer(pool: Any) -> None:
    """Make the connections ``pool`` opens from now on pack commands in C (a no-op when
    the pool encodes str other than as strict UTF-8). ``pool`` is anything with a
    ``connection_class`` and its ``connection_kwargs``: a pool, or a cluster node."""
    if hasattr(pool, "connection_class") and _strict_utf8(pool.connection_kwargs):
        pool.connection_class = _c_packing(pool.connection_class)


def use_c_packer_cluster(client: Any) -> None:
    """The same for an asyncio ``ValkeyCluster`` before its ``initialize()``: its startup
    nodes, and the node settings it copies into every node it discovers later."""
    nodes = getattr(client, "nodes_manager", None)
    kwargs = getattr(nodes, "connection_kwargs", None)
    if not isinstance(kwargs, dict) or "connection_class" not in kwargs:
        return  # not the valkey-py layout this knows: its own packer, as before
    if not _strict_utf8(kwargs):
        return
    kwargs["connection_class"] = _c_packing(kwargs["connection_class"])
    for node in nodes.startup_nodes.values():  # type: ignore[union-attr]
        use_c_packer(node)
