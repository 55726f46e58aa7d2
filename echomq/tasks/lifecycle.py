"""A worker's lifecycle hooks: ``App(on_startup=..., on_shutdown=...)``, once per process.

``on_startup(context)`` runs once per worker process, before its first claim; ``context``
is a fresh ``types.SimpleNamespace`` the hook fills (``context.db = await make_pool()``),
and every handler of that worker reads it as ``current_job().context`` (in its task or its
thread; a child process of ``isolation="process"`` has none). ``on_shutdown(context)`` runs
once the worker has drained (after a SIGTERM or SIGINT too) to close what startup opened;
then the context is emptied. Either may be a plain function or an ``async`` one.

A failing ``on_startup`` stops the worker before it claims anything: ``StartupFailed``
(an ``EchoMQError``, which ``echomq worker`` prints as one line and exits 1); a failing
``on_shutdown`` is logged and the worker still exits.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any

from echomq.core.errors import EchoMQError
from echomq.runtime.handler import worker_context

log = logging.getLogger("echomq.worker")

#: a lifecycle hook: called with the worker's context, sync or ``async``
Hook = Callable[[SimpleNamespace], Awaitable[Any] | Any]


class StartupFailed(EchoMQError):
    """The app's ``on_startup`` hook raised: the worker did not start (nothing claimed)."""


async def call(hook: Hook, context: SimpleNamespace) -> None:
    """``hook(context)``, awaited when it is a coroutine function (or returns an awaitable)."""
    got = hook(context)
    if inspect.isawaitable(got):
        await got


@contextlib.asynccontextmanager
async def hooks(app: Any) -> AsyncIterator[SimpleNamespace]:
    """Around a worker's life: its context set for the jobs it starts inside, ``app``'s
    ``on_startup`` before, ``on_shutdown`` after (both optional)."""
    context = SimpleNamespace()
    startup: Hook | None = getattr(app, "on_startup", None)
    shutdown: Hook | None = getattr(app, "on_shutdown", None)
    if startup is not None:
        try:
            await call(startup, context)
        except Exception as exc:
            raise StartupFailed(f"on_startup {_name(startup)} failed: "
                                f"{type(exc).__name__}: {exc} (the worker did not start)"
                                ) from exc
    token = worker_context.set(context)
    try:
        yield context
    finally:
        worker_context.reset(token)
        if shutdown is not None:
            try:
                await call(shutdown, context)
            except Exception:
                log.exception("on_shutdown %s failed", _name(shutdown))
        context.__dict__.clear()


def _name(hook: Hook) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)
