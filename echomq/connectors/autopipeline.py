"""Auto-pipelining for the ``AsyncConnector``: script steps issued together share a trip.

A script step (``Eval``) issued while nothing is in flight on the connector goes out at
once, in its caller's task, exactly as without auto-pipelining: a lone call pays no loop
turn. The steps coroutines issue while a call or a pipeline is in flight queue up and go
out together as one pipeline (the flush runs after every task already scheduled in that
loop turn, so callers woken together share it), and each caller awaits its own reply or
error, exactly as if it had been sent alone: a refusal lands on its own caller; a
``NOSCRIPT`` loads the script and re-sends only the steps that hit it. A script never
blocks, so one slow call cannot hold the others.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from valkey import exceptions as vexc

from echomq.connectors.plan import Pipe
from echomq.connectors.replies import WIRE_FAULTS, server_error, wire_error
from echomq.core.steps import Arg, Eval

if TYPE_CHECKING:
    from echomq.connectors.aconnector import AsyncConnector

_Queued = tuple[tuple[Arg, ...], Eval, "asyncio.Future[Any]"]


class AutoPipeline:
    """The calls queued for this iteration's pipeline, and the flushes in flight."""

    def __init__(self, conn: AsyncConnector) -> None:
        self.conn = conn
        self._queued: list[_Queued] = []
        self._busy = 0  # sends in flight: lone calls and pipelines
        self.flushes = 0  # queued batches sent (a lone call on an idle connector is not one)
        self._flushing: set[asyncio.Task[None]] = set()

    async def call(self, step: Eval) -> Any:
        """Perform one script step: at once when the connector is idle, else in the
        pipeline of what queues up behind the calls in flight."""
        if self._busy or self._queued:
            return await self.submit(step)
        self._busy += 1
        try:
            return await self.conn._eval(step)
        finally:
            self._busy -= 1

    def submit(self, step: Eval) -> asyncio.Future[Any]:
        """Queue one script step for the next pipeline; its future gets the reply or the
        mapped error. Sizes are checked here, so a refusal raises at the caller."""
        args = self.conn._command(step)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queued.append((args, step, fut))
        if len(self._queued) == 1:
            # the flush's first step runs after every task already scheduled this turn:
            # the callers woken together (by the last pipeline's replies) join this one
            task = loop.create_task(self._flush_queued())
            self._flushing.add(task)  # held until done (the loop keeps only weak refs)
            task.add_done_callback(self._flushing.discard)
        return fut

    async def _flush_queued(self) -> None:
        batch, self._queued = self._queued, []
        self._busy += 1
        self.flushes += 1
        try:
            await self._flush(batch)
        finally:
            # idle again one loop turn later: the callers this batch's replies woke (a
            # producer loop's next calls) still find it busy and share the next pipeline
            asyncio.get_running_loop().call_soon(self._idle)

    def _idle(self) -> None:
        self._busy -= 1

    async def _flush(self, batch: list[_Queued]) -> None:
        conn = self.conn
        if len(batch) == 1:  # alone in its turn: sent as it would be without batching
            _, step, fut = batch[0]
            try:
                reply = await conn._eval(step)
            except BaseException as exc:
                settle(fut, exc)
            else:
                settle(fut, reply)
            return
        try:
            replies = list(await conn._issue(Pipe(tuple(args for args, _, _ in batch))))
            missing = [i for i, r in enumerate(replies) if isinstance(r, vexc.NoScriptError)]
            if missing:
                for name in dict.fromkeys(batch[i][1].script for i in missing):
                    await conn._issue(conn._load(name))
                again = await conn._issue(Pipe(tuple(batch[i][0] for i in missing)))
                for i, reply in zip(missing, again, strict=True):
                    replies[i] = reply
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # SCRIPT LOAD refused
            for _, _, fut in batch:
                settle(fut, server_error(exc))
            return
        except WIRE_FAULTS as exc:
            for _, _, fut in batch:
                settle(fut, wire_error(exc))
            return
        except BaseException as exc:  # cancelled mid-flight: nobody is left waiting forever
            for _, _, fut in batch:
                settle(fut, exc)
            raise
        for (_, step, fut), reply in zip(batch, replies, strict=True):
            if isinstance(reply, (vexc.ResponseError, vexc.BusyLoadingError)):
                reply = conn._refusal(step, reply)
            elif isinstance(reply, WIRE_FAULTS):
                reply = wire_error(reply)
            settle(fut, reply)


def settle(fut: asyncio.Future[Any], outcome: Any) -> None:
    """Give one auto-pipelined caller its reply, or raise its error at it (unless it
    stopped waiting)."""
    if fut.done():
        return
    if isinstance(outcome, BaseException):
        fut.set_exception(outcome)
    else:
        fut.set_result(outcome)
