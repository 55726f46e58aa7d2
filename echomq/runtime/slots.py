"""A consumer's slots: its concurrency, shared by its job tasks, its ack batcher and its claim
loop.

A slot is taken by a job whose task runs (``inflight``: its handler, or a patient
settlement), by a success whose batched ack has not landed (``settling``), or by a claim in
flight that was promised it (``reserved``: the claim loop's, or one riding an ack flush), so
the two claimers never fill the same free slot twice. A full claim loop waits for a slot on a
bare future, which ``freed`` resolves once one is free.
"""

from __future__ import annotations

import asyncio


class Slots:
    """``concurrency`` slots and who holds them (plain fields: the hot path counts here)."""

    __slots__ = ("concurrency", "inflight", "reserved", "settling", "waiter")

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.settling = 0  # hot-path successes whose ack has not landed
        self.reserved = 0  # promised to a claim in flight
        self.waiter: asyncio.Future[None] | None = None  # the claim loop's, while full

    def free(self) -> int:
        """Slots neither running, nor waiting for their ack, nor promised to a claim in
        flight."""
        return self.concurrency - len(self.inflight) - self.settling - self.reserved

    def freed(self) -> None:
        """Wake a claim loop waiting for a slot, if one is free now."""
        waiter = self.waiter
        if waiter is not None and not waiter.done() and self.free() > 0:
            waiter.set_result(None)

    def stopping(self) -> None:
        """The consumer stops: end a wait for a slot at once."""
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float, stop: asyncio.Event) -> None:
        """Wait up to ``timeout`` s for a free slot (or ``stop``). A bare future: this runs
        once per batch of jobs, so it spends no task on the wait."""
        if self.free() > 0 or stop.is_set():
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self.waiter = waiter
        timer = loop.call_later(max(timeout, 0.001), _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self.waiter = None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
