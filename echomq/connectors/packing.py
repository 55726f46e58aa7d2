"""The asyncio client's command packer, in C.

valkey-py's sync connections pack a command with libvalkey's C packer; its asyncio
connections pack in Python, one ``Encoder.encode`` and one bytes join per argument. A bulk
admission carries thousands of arguments (``enqueue_many``: two per job), so on an
``AsyncConnector`` packing was about half of a bulk call's wall time. ``use_c_packer(pool)``
(``use_c_packer_cluster(client)`` for a cluster client) makes asyncio connections pack with
the same C packer the sync ones use: the same bytes on the wire (libvalkey encodes str as
UTF-8, int and float as valkey-py does), and an argument the C packer refuses (``None``, a
bool, another type) goes to valkey-py's own packer, which raises its own ``DataError``.

The same class reads a reply already buffered in libvalkey's reader without arming a
timer: valkey-py wraps every reply read in ``asyncio.timeout(socket_timeout)`` (5 s by
default), a timer made and cancelled per reply, ~15 % of an auto-pipelined enqueue's time,
though a reply that is already buffered is returned without a wait the timer could end.
A reply not yet buffered goes to valkey-py's own read, timer and all: the same replies,
errors, disconnects and health-check stamps as before.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
from typing import Any

from libvalkey import pack_command as _c_pack
from valkey._parsers.libvalkey import NOT_ENOUGH_DATA, _AsyncLibvalkeyParser
from valkey.exceptions import ConnectionError as ValkeyConnectionError
from valkey.exceptions import ResponseError


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

    read_timed = cls.read_response  # type: ignore[attr-defined]

    async def read_response(self: Any, disable_decoding: bool = False,
                            timeout: float | None = None, *,
                            disconnect_on_error: bool = True,
                            push_request: bool | None = False) -> Any:
        parser = self._parser
        if type(parser) is _AsyncLibvalkeyParser and parser._connected and timeout is None:
            reader: Any = parser._reader
            try:
                response = reader.gets(False) if disable_decoding else reader.gets()
            except BaseException:  # a protocol error: valkey-py drops the connection too
                if disconnect_on_error:
                    await self.disconnect(nowait=True)
                raise
            if response is not NOT_ENOUGH_DATA:
                return await _buffered(self, response, disconnect_on_error)
        # nothing buffered (gets() consumed nothing): valkey-py's timed read
        return await read_timed(self, disable_decoding, timeout,
                                disconnect_on_error=disconnect_on_error,
                                push_request=push_request)

    return type(f"CPacked{cls.__name__}", (cls,),
                {"pack_command": pack_command, "read_response": read_response})


async def _buffered(conn: Any, response: Any, disconnect_on_error: bool) -> Any:
    """What valkey-py's ``read_response`` does with a reply its parser returned."""
    # as the libvalkey parser: a lost connection reported in the reply is raised, and as
    # read_response, raising it drops the connection
    if isinstance(response, ValkeyConnectionError) or (
            isinstance(response, list) and response
            and isinstance(response[0], ValkeyConnectionError)):
        if disconnect_on_error:
            await conn.disconnect(nowait=True)
        raise response if isinstance(response, ValkeyConnectionError) else response[0]
    if conn.health_check_interval:
        conn.next_health_check = asyncio.get_running_loop().time() + conn.health_check_interval
    if isinstance(response, ResponseError):
        raise response from None
    return response


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
