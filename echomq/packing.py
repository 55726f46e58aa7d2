"""The asyncio client's command packer, in C.

valkey-py's sync connections pack a command with libvalkey's C packer; its asyncio
connections pack in Python, one ``Encoder.encode`` and one bytes join per argument. A bulk
admission carries thousands of arguments (``enqueue_many``: two per job), so on an
``AsyncConnector`` packing was about half of a bulk call's wall time. ``use_c_packer(pool)``
makes a pool's asyncio connections pack with the same C packer the sync ones use: the same
bytes on the wire (libvalkey encodes str as UTF-8, int and float as valkey-py does), and an
argument the C packer refuses (``None``, a bool, another type) goes to valkey-py's own
packer, which raises its own ``DataError``.
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


def use_c_packer(pool: Any) -> None:
    """Make the connections ``pool`` opens from now on pack commands in C (a no-op when
    the pool encodes str other than as strict UTF-8)."""
    kwargs = getattr(pool, "connection_kwargs", {})
    if not hasattr(pool, "connection_class"):
        return
    encoding = codecs.lookup(kwargs.get("encoding", "utf-8")).name
    if encoding != "utf-8" or kwargs.get("encoding_errors", "strict") != "strict":
        return
    pool.connection_class = _c_packing(pool.connection_class)
