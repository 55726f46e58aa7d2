"""``isolation="process"``: a plain-function task run in a child process that can be killed.

A plain function in the worker's thread pool cannot be stopped: at a timeout it is
abandoned, and a cancel request only sets ``current_job().cancelled``. A task declared
``@app.task(isolation="process")`` runs each job in a fresh child process instead (the
``forkserver`` start method: forked from a clean single-threaded server process, not from the
worker with its threads and event loop), and the consumer awaits it like an ``async``
handler: a timeout or a cancel request kills the child (SIGKILL) and the attempt ends there.

What it costs and needs: a process per job (a few ms from the fork server, plus whatever
importing the task's module costs in the child); the function must be importable by its
module and qualified name (a module-level function, not one defined in ``__main__`` or a
closure); arguments and the return value cross a pipe (they are JSON values already).
Inside the child ``current_job()`` returns the job's id, attempts, payload and queue;
``progress`` and ``cancelled`` are not available there (a cancel kills the child instead).
``raise Delay(...)`` works as in any handler.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import multiprocessing.connection
from collections.abc import Callable
from typing import Any

from . import handler
from .handler import Delay, Job, RateLimited

_CONTEXT = "forkserver"


class IsolatedFailure(Exception):
    """A child's exception that could not cross the pipe as itself: its type name and text."""

    def __init__(self, kind: str, text: str) -> None:
        super().__init__(text)
        self.kind = kind

    def __str__(self) -> str:  # the error text reads as the child's own exception would
        return str(self.args[0])


def reference(fn: Callable[..., Any]) -> tuple[str, str]:
    """``(module, qualname)`` by which a child process finds ``fn``; ``ValueError`` when it
    cannot (a closure, a lambda, or a function of ``__main__``)."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise ValueError(f"isolation='process' needs an importable module-level function, "
                         f"not {module}.{qualname}")
    return module, qualname


def _resolve(module: str, qualname: str) -> Callable[..., Any]:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    fn: Callable[..., Any] = getattr(target, "fn", target)  # the attribute is usually a Task
    return fn


def _child(ref: tuple[str, str], args: list[Any], kwargs: dict[str, Any],
           job: tuple[str, str, int, bytes], out: multiprocessing.connection.Connection) -> None:
    handler.enter(Job(*job))
    try:
        value = _resolve(*ref)(*args, **kwargs)
    except Delay as d:
        out.send(("delay", d.mode, d.value))
    except RateLimited as limited:
        out.send(("rate_limited", limited.ms))
    except BaseException as exc:  # everything crosses back as a failure
        out.send(("fail", type(exc).__name__, str(exc)))
    else:
        out.send(("ok", value))
    finally:
        out.close()


def isolated(ref: tuple[str, str], args: list[Any], kwargs: dict[str, Any]
             ) -> Callable[[Job], Any]:
    """An ``async`` handler running ``ref(*args, **kwargs)`` in a killable child process."""

    async def run(job: Job) -> Any:
        ctx: Any = multiprocessing.get_context(_CONTEXT)
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, name=f"echomq-{job.id}", daemon=True,
                           args=(ref, args, kwargs, (job.queue, job.id, job.token, job.payload),
                                 writer))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, proc.start)
        writer.close()
        ready = asyncio.Event()
        loop.add_reader(reader.fileno(), ready.set)
        try:
            await ready.wait()  # a reply, or EOF when the child died without one
            try:
                reply = reader.recv()
            except EOFError:
                reply = None
        except BaseException:
            proc.kill()  # a timeout or a cancel request: stop it for real
            raise
        finally:
            loop.remove_reader(reader.fileno())
            reader.close()
            await loop.run_in_executor(None, proc.join, 5)
        if reply is None:
            raise IsolatedFailure("ProcessExit", f"child process exited with code "
                                                 f"{proc.exitcode} before replying")
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "delay":
            raise Delay(reply[2]) if reply[1] == "in" else Delay(at=reply[2])
        if reply[0] == "rate_limited":
            raise RateLimited(reply[1])
        # named as the child's exception, so the error text reads "ValueError: ..."
        raise type(reply[1], (IsolatedFailure,), {})(reply[1], reply[2])

    return run
