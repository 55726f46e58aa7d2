"""``isolation="process"``: a plain-function task run in a child process that can be killed.

A plain function in the worker's thread pool cannot be stopped: at a timeout it is
abandoned, and a cancel request only sets ``current_job().cancelled``. A task declared
``@app.task(isolation="process")`` runs each job in a fresh interpreter instead
(``python -m echomq.runtime.child``, started with ``asyncio.create_subprocess_exec``: no fork of
the worker with its threads and event loop, and no re-import of the worker's ``__main__``),
and the consumer awaits it like an ``async`` handler: a timeout or a cancel request kills
the child (SIGKILL) and the attempt ends there.

What it costs and needs: an interpreter start per job (importing echomq and the task's
module: about 0.3 s of CPU here, so it suits long jobs that must be killable, not short
ones); the function must be importable by its module and qualified name (a module-level
function, not one of ``__main__`` or a closure). The call goes to the child as JSON on its
stdin (the arguments are JSON already) and the reply comes back on its stdout; what the
function prints goes to the worker's stderr. Inside the child ``current_job()`` returns the
job's id, attempts, payload and queue; ``progress`` and ``cancelled`` are not available
there (a cancel kills the child instead). ``raise Delay(...)``, ``Fail``, ``Retry`` and
``RateLimited`` work as in any handler, and ``retry_on``/``dont_retry_on`` match the child's
exception by its classes' qualified names (``IsolatedFailure.lineage``).
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

from echomq.runtime.handler import Delay, Fail, Job, RateLimited, Retry


class IsolatedFailure(Exception):
    """A child's exception, by its type name and text (it does not cross as itself);
    ``lineage``: the qualified names of its class and the classes it derives from."""

    lineage: tuple[str, ...] = ()
    formatted: str | None = None  # the child's formatted traceback, for the job's history


class Unencodable:
    """A child's return value JSON cannot carry (an error only if the task keeps results)."""

    def __init__(self, why: str) -> None:
        self.why = why


def reference(fn: Callable[..., Any]) -> tuple[str, str]:
    """``(module, qualname)`` by which a child process finds ``fn``; ``ValueError`` when it
    cannot (a closure, a lambda, or a function of ``__main__``)."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise ValueError(f"isolation='process' needs an importable module-level function, "
                         f"not {module}.{qualname}")
    return module, qualname


def resolve(module: str, qualname: str) -> Callable[..., Any]:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    fn: Callable[..., Any] = getattr(target, "fn", target)  # the attribute is usually a Task
    return fn


def isolated(ref: tuple[str, str], args: list[Any], kwargs: dict[str, Any]
             ) -> Callable[[Job], Any]:
    """An ``async`` handler running ``ref(*args, **kwargs)`` in a killable child process."""

    async def run(job: Job) -> Any:
        call = json.dumps({
            "ref": ref, "args": args, "kwargs": kwargs, "path": sys.path,
            "job": [job.queue, job.id, job.token, base64.b64encode(job.payload).decode()],
        }).encode()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "echomq.runtime.child", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE)
        try:
            out, _ = await proc.communicate(call)
        except BaseException:
            proc.kill()  # a timeout or a cancel request: stop it for real
            await proc.wait()
            raise
        try:
            reply = json.loads(out.decode().splitlines()[-1])
        except (ValueError, IndexError):
            raise IsolatedFailure(f"the child process exited with code {proc.returncode} "
                                  f"before replying") from None
        kind = reply[0]
        if kind == "ok":
            return reply[1]
        if kind == "unencodable":
            return Unencodable(reply[1])
        if kind == "delay":
            raise Delay(reply[2]) if reply[1] == "in" else Delay(at=reply[2])
        if kind == "rate_limited":
            raise RateLimited(reply[1])
        if kind == "final":
            raise Fail(reply[1])
        if kind == "retry":
            again = Retry(reply[1])
            again.text = reply[2]  # the error text as the child wrote it
            raise again
        # named as the child's exception, so the error text reads "ValueError: ..."
        raise type(reply[1], (IsolatedFailure,),
                   {"lineage": tuple(reply[3] if len(reply) > 3 else ()),
                    "formatted": reply[4] if len(reply) > 4 else None})(reply[2])

    return run
