"""A batch member's side of its batch (``echomq.verbs.batches``): which batch a job in
hand belongs to (its payload's ``batch`` key), ``current_job().batch.add`` and the notices
a consumer sends to each batch's slot once its members' ends landed.

The notices of one loop turn go out together, one ``batches.settle`` per batch (as the
acks of one turn share an ``ack_many``), so a batch of 10,000 members costs its workers
about one extra call per flush, not one per job. A notice is retried through weather (a
repeat counts once: ``settle`` is idempotent per member); clock: the retry pauses are
HOST monotonic (the event loop's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from echomq.core import errors
from echomq.verbs import batches

log = logging.getLogger("echomq.consumer")

#: a notice's tries through weather, and the first pause between them (s, doubling)
TRIES, PAUSE_S = 6, 0.05


def batch_of(payload: bytes) -> str | None:
    """The batch id a job's payload names (``None``: not a batch member). A member's mark
    is the payload's last key (``..,"batch":"<id>"}``, appended at admission), so it is
    read without parsing the JSON: a plain job pays one substring test."""
    at = payload.rfind(b'"batch":"')
    if at < 0 or not payload.endswith(b'"}'):
        return None
    end = payload.find(b'"', at + 9)
    if end != len(payload) - 2:  # a "batch" key elsewhere (an argument's): not the mark
        return None
    return payload[at + 9:end].decode()


class MemberBatch:
    """``current_job().batch``: the batch of the job in hand. ``add(sig, ...)`` enrolls and
    admits more members (signatures of the app's tasks) while this job still counts as
    pending, so the batch cannot end in between; the new members' ids."""

    __slots__ = ("id",)

    def __init__(self, batch_id: str) -> None:
        self.id = batch_id

    def add(self, *sigs: Any) -> list[str]:
        if not sigs:
            return []
        app = sigs[0].task.app  # the signatures' app admits them (the tasks layer)
        added: list[str] = app.add_to_batch(self.id, sigs)
        return added

    def __repr__(self) -> str:
        return f"<MemberBatch {self.id}>"


class BatchNotices:
    """The ends a consumer owes its members' batches, sent once per loop turn."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._due: dict[str, list[tuple[str, str]]] = {}
        self._flushing: asyncio.Task[None] | None = None

    def ended(self, queue: str, job_id: str, payload: bytes, outcome: str) -> None:
        """The end ``outcome`` (``completed``, ``dead``, ``cancelled``) of a job landed on
        its queue: owe its batch a notice, if it is a member."""
        bid = batch_of(payload)
        if bid is None:
            return
        self._due.setdefault(bid, []).append((job_id, outcome))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def drain(self) -> None:
        """Wait for the notices under way (a consumer stopping)."""
        while self._flushing is not None and not self._flushing.done():
            await self._flushing

    async def _flush(self) -> None:
        while self._due:
            due, self._due = self._due, {}
            await asyncio.gather(*(self._send(bid, items) for bid, items in due.items()))

    async def _send(self, bid: str, items: Sequence[tuple[str, str]]) -> None:
        pause = PAUSE_S
        for _ in range(TRIES):
            try:
                await batches.settle(self.conn, bid, items)
                return
            except (errors.WireError, errors.Unavailable):
                await asyncio.sleep(pause)
                pause *= 2
            except errors.EchoMQError as exc:
                log.warning("batch %s: %d end(s) not counted: %s", bid, len(items), exc)
                return
        log.warning("batch %s: %d end(s) not counted: the server stayed unreachable", bid,
                    len(items))
