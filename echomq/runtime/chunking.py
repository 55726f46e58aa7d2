"""The chunk path of a consumer: a chunk task's jobs gathered from its claims, its handler
called once per chunk and the completed ones acked with one ``ack_many``.

A chunk task (``@app.task(chunk=N)``) declares its ``ChunkHandler``; a consumer given
some (``Consumer(chunks=...)``) takes each claimed job of theirs (``ChunkPath.take``)
instead of running it in a task of its own: no route, no per-job context, event, meter or
task count, no settlement of its own. The jobs of one task gather in a ``Window`` (holding
their slots and their lease checkpoints) until ``size`` of them wait or ``wait_s`` passed
since the first (HOST monotonic, the event loop's clock); the handler then runs once, and
the jobs it did not fail are acked in one round trip that also claims what their slots can
take (``jobs.ack_and_claim``, as the settler's ack flush). A failed job (the handler's
``{job_id: exc}``, or every job when it raised) goes the per-job way with its verdict held
for it (``ChunkHandler.hold``): its route runs the task's retry policy, its events, counts
and callbacks as for any failure. A job whose payload asks for more than the chunk path
gives (a flow node's marks, a per-call timeout, a sealed payload) goes the per-job way too.

An ack that meets weather is sent again for up to a third of the lease; one that still
cannot be sent is logged, and the jobs' leases lapse and the reaper returns them (a chunk
task's jobs run at least once, as every job).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from echomq.core import errors
from echomq.runtime.handler import Job
from echomq.runtime.leases import Held
from echomq.verbs import jobs

if TYPE_CHECKING:
    from echomq.runtime.context import Context

log = logging.getLogger("echomq.consumer")

#: the first pause (s, doubling) before an ack sent again through weather
PAUSE_S = 0.05



def _named(payload: bytes) -> str | None:
    """The task a plain JSON payload names, read without parsing it (``None``: another
    format, or a name the chunk path leaves to the router). Inside JSON strings every
    quote is escaped, and the payload's keys are sorted (``args``, ``kwargs``, ``task``,
    then only ``timeout``, ``trace`` and a batch mark), so the last ``"task":"`` is the
    call's own key."""
    at = payload.rfind(b'"task":"')
    if at < 0 or payload[:1] != b"{":
        return None
    end = payload.find(b'"', at + 8)
    name = payload[at + 8:end]
    return None if b"\\" in name else name.decode()


class ChunkHandler(Protocol):
    """A chunk task's handler as a consumer runs it (``echomq.tasks.chunks.Chunker``)."""

    @property
    def size(self) -> int:
        """Jobs per call, at most."""
        ...

    @property
    def wait_s(self) -> float:
        """How long (s) a chunk waits to fill after its first job came."""
        ...

    async def run(self, jobs: list[Job]) -> dict[str, BaseException]:
        """Call the handler once with ``jobs``: the jobs it failed (every one, with the
        error it raised, when it raised)."""
        ...

    def hold(self, job_id: str, error: BaseException) -> None:
        """Keep ``error`` as the job's outcome for its per-job run."""
        ...


class Window:
    """The jobs of one chunk task gathering on this consumer, the future their call waits
    for (set when the window is full, or by its timer) and the task that runs them."""

    __slots__ = ("jobs", "ready", "task", "timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, wait_s: float) -> None:
        self.jobs: list[Job] = []
        self.ready: asyncio.Future[None] = loop.create_future()
        self.timer = loop.call_later(wait_s, self.close)
        self.task: asyncio.Task[None] | None = None

    def close(self) -> None:
        """No more jobs join: the call starts."""
        self.timer.cancel()
        if not self.ready.done():
            self.ready.set_result(None)


class ChunkPath:
    """``ctx``'s chunk path over ``handlers`` (task name -> its ``ChunkHandler``)."""

    def __init__(self, ctx: Context, handlers: Mapping[str, ChunkHandler]) -> None:
        self.ctx = ctx
        self.handlers = dict(handlers)
        self._open: dict[str, Window] = {}

    def take(self, job: Job) -> bool:
        """Gather ``job`` into its task's window if it is a chunk task's (``False``: it
        runs the per-job way). A window that fills starts its call at once."""
        payload = job.payload
        name = _named(payload)
        if name is None or b'"flow":' in payload or b'"timeout":' in payload:
            return False
        handler = self.handlers.get(name)
        if handler is None:
            return False
        ctx = self.ctx
        window = self._open.get(name)
        if window is None:
            loop = asyncio.get_running_loop()
            window = self._open[name] = Window(loop, handler.wait_s)
            window.task = loop.create_task(self._run(name, handler, window))
        window.jobs.append(job)
        assert window.task is not None
        ctx.slots.inflight[job.id] = window.task
        job._task = name
        ctx.checkpoints.held[job.id] = Held(job, ctx.lease_ms, ctx.lease_ms,
                                            ctx.checkpoints.tick, name=name)
        if len(window.jobs) >= handler.size:
            del self._open[name]
            window.close()
        return True

    async def _run(self, name: str, handler: ChunkHandler, window: Window) -> None:
        ctx = self.ctx
        per_job: set[str] = set()
        try:
            await window.ready
            if self._open.get(name) is window:  # closed by its timer
                del self._open[name]
            chunk = window.jobs
            failed = await handler.run(chunk)
            for job in chunk:
                error = failed.get(job.id)
                if error is not None:  # its own run settles it, by its task's policy
                    handler.hold(job.id, error)
                    per_job.add(job.id)
                    ctx.checkpoints.held.pop(job.id, None)
                    ctx.slots.inflight[job.id] = asyncio.get_running_loop().create_task(
                        ctx.process(job))
            done = [job for job in chunk if job.id not in per_job]
            if done:
                await self._ack(done)
        finally:
            window.timer.cancel()
            if self._open.get(name) is window:  # cancelled while it gathered
                del self._open[name]
            held, inflight = ctx.checkpoints.held, ctx.slots.inflight
            for job in window.jobs:
                if job.id not in per_job:
                    held.pop(job.id, None)
                    inflight.pop(job.id, None)
            ctx.slots.freed()

    async def _ack(self, done: list[Job]) -> None:
        """Ack ``done`` (one queue's or many partitions'), claiming for the freed slots in
        the same round trip on a single queue."""
        ctx = self.ctx
        by_queue: dict[str, list[Job]] = {}
        for job in done:
            by_queue.setdefault(job.queue, []).append(job)
        for q, held in by_queue.items():
            # the slots these acks free are refilled in the same round trip (a chunk's
            # jobs leave their slots together: the next chunk is claimed at once)
            want = len(held) + ctx.slots.free() if ctx.spread.single and ctx.claiming() else 0
            ctx.slots.reserved += want
            try:
                got = await self._send(q, held, want)
            finally:
                ctx.slots.reserved -= want
            if want:
                ctx.spread.claimed(q, want, len(got))
            if got:
                # this window's slots are still counted taken: free them first
                for job in held:
                    ctx.slots.inflight.pop(job.id, None)
                    ctx.checkpoints.held.pop(job.id, None)
                ctx.start(got, q)

    async def _send(self, queue: str, held: list[Job], want: int) -> list[jobs.Claim]:
        """Ack ``held`` on ``queue`` (and claim ``want``): the claims. Through weather the
        ack alone is sent again (HOST monotonic pauses, doubling) for up to a third of the
        lease (a refusal then may be an earlier try that landed: ``_landed``). After that the
        jobs' leases lapse and they run again."""
        ctx = self.ctx
        entries = [(job.id, job.token) for job in held]
        keep = ctx.retention.keeps_completed
        pause, again = PAUSE_S, False
        deadline = asyncio.get_running_loop().time() + ctx.lease_ms / 3000
        while True:
            try:
                replies, claims = await jobs.ack_and_claim(ctx.conn, queue, entries,
                                                           ctx.lease_ms, want, keep=keep)
                break
            except (errors.WireError, errors.Unavailable) as exc:
                if asyncio.get_running_loop().time() + pause > deadline:
                    log.warning("%d job(s) of a chunk on %s not acked (their leases lapse "
                                "and they run again): %s", len(held), queue, exc)
                    return []
                await asyncio.sleep(pause)
                pause, want, again = pause * 2, 0, True
        stats = ctx.stats
        for job, reply in zip(held, replies, strict=True):
            landed = reply is None or (again and await self._landed(job))
            if landed:
                stats.completed += 1
                stats.already_settled += reply is not None
                ctx.member_ended(job, "completed")
            else:
                stats.lost += 1
                log.warning("job %s: its chunk's ack was refused: %s", job.id, reply)
        got: list[jobs.Claim] = claims
        return got

    async def _landed(self, job: Job) -> bool:
        """Whether a refused ack sent again only found its own earlier try (``jobs.fate``:
        the row is gone or settled at this job's token, not moved on)."""
        try:
            fate: str = await jobs.fate(self.ctx.conn, job.queue, job.id, job.token)
        except errors.EchoMQError:
            return False
        return fate != "moved"
