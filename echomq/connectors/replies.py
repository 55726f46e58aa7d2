"""Replies and faults: valkey-py's exceptions mapped to ours, the server's text kept exact.

Server refusals become the ``errors.ServerError`` subclass for their text (``server_error``),
with the code valkey-py stripped put back; connection failures become ``errors.WireError``
(``wire_error``). Both connectors, the plan and the auto-pipeline map through here.
"""

from __future__ import annotations

import os
import re
import traceback
from collections.abc import Awaitable
from typing import Any

from valkey import exceptions as vexc

from echomq.core import errors

# A reply's first word survives valkey-py only when it is not "ERR" (stripped): these are
# the codes the server (and our scripts) send that valkey-py keeps. Anything else was an
# "ERR ..." reply, even when its text opens with an upper-case word ("ERR WAITAOF ...").
_KEPT_CODES = frozenset({
    "WRONGTYPE", "BUSY", "BUSYKEY", "BUSYGROUP", "MISCONF", "MASTERDOWN", "NOREPLICAS",
    "UNKILLABLE", "NOTBUSY", "NOPROTO", "CROSSSLOT", "CLUSTERDOWN", "TRYAGAIN", "MOVED",
    "ASK", "UNBLOCKED", "NOGROUP", "NOQUORUM", "NOGOODSLAVE", "NOTREADY", "INVALIDOBJ",
})
_CODE = re.compile(r"^EMQ[A-Z0-9_]*$")
# a cluster client raises ClusterError / ValkeyClusterException when no node answers for a
# slot (a primary died and no replica has taken over yet): weather, like a lost connection
WIRE_FAULTS = (vexc.ConnectionError, vexc.TimeoutError, OSError, vexc.ClusterError,
                vexc.ValkeyClusterException)


# valkey-py strips the code of these replies and says it with the exception's class instead
_STRIPPED: tuple[tuple[type[Exception], str], ...] = (
    (vexc.OutOfMemoryError, "OOM"),
    (vexc.ReadOnlyError, "READONLY"),
    (vexc.BusyLoadingError, "LOADING"),
    (vexc.NoScriptError, "NOSCRIPT"),
    (vexc.NoPermissionError, "NOPERM"),
    (vexc.ExecAbortError, "EXECABORT"),
)


def server_error(exc: Exception) -> errors.ServerError:
    # The contract keeps server texts exact, code included (a producer backs off on OOM),
    # so the code valkey-py stripped goes back: from the exception's class where it has
    # one, else "ERR" for a reply whose first word is not a code (ERR is stripped too).
    text = str(exc)
    if isinstance(exc, vexc.ClusterCrossSlotError) or text.startswith("CROSSSLOT"):
        return _cross_slot(text)
    for cls, code in _STRIPPED:
        if isinstance(exc, cls):
            return errors.from_server(f"{code} {text}")
    first = text.split(" ", 1)[0]
    if first not in _KEPT_CODES and not _CODE.match(first):
        text = "ERR " + text
    return errors.from_server(text)


# what a connector's plan maps on its way out (``mapped``): a refusal, a LOADING reply, weather
CLIENT_FAULTS = (vexc.ResponseError, vexc.BusyLoadingError, *WIRE_FAULTS)


def mapped(exc: BaseException) -> BaseException:
    """A client exception as ours, chained the way the connectors raise it: a refusal's
    ``ServerError`` with no cause (the server's text says it all), a ``WireError`` caused by
    the lost connection. (``LOADING`` is a refusal, though valkey-py files it under
    connection errors.)"""
    err: BaseException
    if isinstance(exc, (vexc.ResponseError, vexc.BusyLoadingError)):
        err = server_error(exc)
        err.__cause__ = None
    else:
        err = wire_error(exc)
        err.__cause__ = exc
    err.__suppress_context__ = True
    return err


def wire_error(exc: BaseException) -> errors.EchoMQError:
    if isinstance(exc, vexc.ValkeyClusterException) and "same key slot" in str(exc):
        # the cluster client refuses a call whose keys span slots before sending it
        return _cross_slot(str(exc))
    return errors.WireError(f"{type(exc).__name__}: {exc}")


def _cross_slot(detail: str) -> errors.CrossSlotError:
    return errors.CrossSlotError(
        f"CROSSSLOT keys of one call span several cluster slots ({detail}); every key of a "
        "queue must carry its hash tag emq:{q}:")


async def topology_guard(pending: Awaitable[Any]) -> Any:
    """Await an async cluster client's call. While it re-learns the topology after a
    primary died, valkey-py's async cluster client can trip over its own state (a default
    node or a stream writer that is None: AttributeError inside valkey); that is the same
    weather as the lost connection behind it, so it is raised as one."""
    try:
        return await pending
    except AttributeError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        if not frames or f"{os.sep}valkey{os.sep}" not in frames[-1].filename:
            raise  # ours: a bug, not weather
        raise vexc.ConnectionError(f"cluster topology is being refreshed ({exc})") from exc
