"""Batches for the task API: ``app.batch(on_complete=, on_success=, on_death=)``.

    with app.batch(on_complete=report.s(), on_death=alert.s()) as b:
        b.add(send.s(1), send.s(2))   # or send.enqueue(3): inside the block it joins b
    app.batch_info(b.id)              # BatchInfo(total, pending, completed, dead, closed)

    async with app.batch(on_complete=report.s()) as b:   # on the app's AsyncConnector
        await b.aadd(send.s(1))       # or await send.aenqueue(2): it joins b

Members are task calls on any queues; each is enrolled in the batch (its slot,
``emq:{b:<id>}:``) and then admitted with a ``batch`` key in its payload, so the worker
that settles it tells the batch (``echomq.runtime.batching``, counted once per member:
``echomq.verbs.batches``). The block's end closes the batch; no callback fires while it is
open. A member adds more with ``current_job().batch.add(sig)`` while it still counts as
pending. A member is admitted now with its task's (or signature's) priority and group;
``unique`` keys and delays are refused in a batch (a member not admitted would never end).
An exception in the block still closes the batch: the members already added run.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from echomq.core import ids
from echomq.tasks.admission import Plan
from echomq.tasks.canvas import Signature
from echomq.tasks.producer import Producer
from echomq.verbs import batches, jobs
from echomq.verbs.batches import BatchInfo, Callback

__all__ = ["Batch", "BatchInfo", "current_batch", "members_plan"]

#: the batch whose ``with`` block runs in this context: ``task.enqueue`` joins it
_open: contextvars.ContextVar[Batch | None] = contextvars.ContextVar("echomq_batch",
                                                                       default=None)


def current_batch() -> Batch | None:
    """The batch whose ``with`` block is open in this context (``None``: none)."""
    return _open.get()


def _priority(sig: Signature) -> int:
    return int((getattr(sig.task, "priority", 0) or 0) if sig.priority is None
               else sig.priority)


def _where(sig: Signature) -> tuple[str, str | None]:
    """The queue (a partition for a partitioned task) and group a member is admitted to."""
    task = sig.task
    return task.target_queue(), sig.group or task.group_for(sig.args, sig.kwargs)


def callback(sig: Signature) -> Callback:
    """A signature as a batch callback record (run later with the BatchInfo appended)."""
    _check(sig, info=True)
    queue, group = _where(sig)
    return Callback(queue, sig.task.name, tuple(sig.args), dict(sig.kwargs), _priority(sig),
                    group)


def _check(sig: Signature, info: bool = False) -> None:
    """A member (or, ``info``, a callback: called with the BatchInfo after its arguments)
    checked before anything is written."""
    if not isinstance(sig, Signature):
        raise TypeError(f"a batch takes signatures (task.s(...)), not {type(sig).__name__}")
    if sig.unique is not None or sig.mode != "now":
        raise ValueError(f"{sig!r}: a batch member is admitted now, without a unique key "
                         "(one not admitted would never end)")
    sig.task.check((*sig.args, {}) if info else sig.args, sig.kwargs)


def members_plan(batch_id: str, sigs: Sequence[Signature]) -> Plan[list[str]]:
    """The admission of ``sigs`` as members of ``batch_id``: enrolled first (one call on the
    batch's slot), then admitted in bulk on their queues; their job ids in order."""
    per_queue: dict[str, list[tuple[str, bytes, dict[str, Any]]]] = {}
    job_ids: list[str] = []
    mark = b',"batch":' + json.dumps(batch_id).encode() + b"}"
    for sig in sigs:
        _check(sig)
        jid = ids.mint()
        body = sig.task.payload(*sig.args, **sig.kwargs)[:-1] + mark
        queue, group = _where(sig)
        opts: dict[str, Any] = {"priority": _priority(sig)}
        if group is not None:
            opts["group"] = group
        per_queue.setdefault(queue, []).append((jid, body, opts))
        job_ids.append(jid)

    def steps() -> Any:
        yield from batches.enroll.steps(batch_id, job_ids)
        for q, items in per_queue.items():
            yield from jobs.enqueue_many.steps(q, items)
        return job_ids

    return Plan(tuple(per_queue), steps(), lambda _: job_ids)


class Batch:
    """``app.batch(...)``: a context manager, sync or async; ``id``, ``add(sig, ...)``,
    ``info()``, and their awaited twins ``aadd``, ``ainfo`` (``aclose``)."""

    def __init__(self, app: Producer, *, on_complete: Signature | None = None,
                 on_success: Signature | None = None, on_death: Signature | None = None,
                 batch_id: str | None = None) -> None:
        self.app = app
        self.id = batch_id or ids.mint()
        given = {"complete": on_complete, "success": on_success, "death": on_death}
        self.callbacks = {k: callback(s) for k, s in given.items() if s is not None}
        self._token: contextvars.Token[Batch | None] | None = None
        self._created = False

    def __enter__(self) -> Batch:
        self._create()
        self._token = _open.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            _open.reset(self._token)
            self._token = None
        self.close()

    async def __aenter__(self) -> Batch:
        await self._acreate()
        self._token = _open.set(self)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._token is not None:
            _open.reset(self._token)
            self._token = None
        await self.aclose()

    def _create(self) -> None:
        if not self._created:
            batches.create(self.app.connector(), self.id, self.callbacks)
            self._created = True

    async def _acreate(self) -> None:
        if not self._created:
            await batches.create(await self.app.aconnector(), self.id, self.callbacks)
            self._created = True

    def add(self, *sigs: Signature) -> list[str]:
        """Enroll and admit ``sigs`` (signatures of the app's tasks); their job ids."""
        self._create()
        return self.app.submit(members_plan(self.id, sigs)) if sigs else []

    async def aadd(self, *sigs: Signature) -> list[str]:
        """``add``, awaited on the app's ``AsyncConnector``."""
        await self._acreate()
        return await self.app.asubmit(members_plan(self.id, sigs)) if sigs else []

    def close(self) -> BatchInfo:
        """Close the batch (the ``with`` block does): the callbacks due now are enqueued
        (an empty batch fires ``on_complete`` and ``on_success`` at once)."""
        self._create()
        return batches.close(self.app.connector(), self.id)

    async def aclose(self) -> BatchInfo:
        """``close``, awaited (the ``async with`` block does)."""
        await self._acreate()
        return await batches.close(await self.app.aconnector(), self.id)

    def info(self) -> BatchInfo | None:
        """The batch's counts now (``app.batch_info``)."""
        return batches.info(self.app.connector(), self.id)

    async def ainfo(self) -> BatchInfo | None:
        """``info``, awaited."""
        return await batches.info(await self.app.aconnector(), self.id)

    def __repr__(self) -> str:
        return f"<Batch {self.id}>"
