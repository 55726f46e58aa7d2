"""Reads and wipes a test bed needs (``echomq.testing``): the waiting jobs of a queue as
``JobInfo`` rows, the flush that gives each test an empty keyspace, and ``standing``: what
a drain round would find to do on each queue, in one round trip. Clock: ``standing``
reads the SERVER clock; the rest none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Eval, Verb, scored, single, text, verb
from echomq.verbs.status import JobInfo, info_of


@verb
def flush() -> Verb[None]:
    """Delete every key of the connection's database (``FLUSHDB``): for test servers only.
    Loaded scripts survive it (the script cache is not part of a database)."""
    return single(Command(("FLUSHDB",)), lambda _r: None)


def _row(reply: Any) -> dict[str, Any]:
    row = {text(k): v for k, v in (reply or {}).items()}
    return {k: (v if k == "payload" else text(v)) for k, v in row.items()}


@verb
def waiting(queue: str) -> Verb[list[JobInfo]]:
    """The jobs waiting on ``queue``: pending (claim order), then each group's lane, then
    the schedule (run-at order), each with its row decoded (``JobInfo``: task, args,
    kwargs, state, run-at). Two round trips plus one per lane read."""
    base = keyspace.base(queue)

    def calls() -> Verb[list[JobInfo]]:
        pending, groups, schedule = yield Batch((
            Command(("ZRANGE", base + "pending", 0, -1)),
            Command(("SMEMBERS", base + "groups")),
            Command(("ZRANGE", base + "schedule", 0, -1, "WITHSCORES")),
        ))
        found: list[tuple[str, Any]] = [(text(m), None) for m in pending]
        names = sorted(text(g) for g in groups or ())
        if names:
            lanes = yield Batch(tuple(
                Command(("ZRANGE", keyspace.lane_key(queue, g), 0, -1)) for g in names))
            found += [(text(m), None) for lane in lanes for m in lane]
        found += [(text(m), s) for m, s in scored(schedule)]
        if not found:
            return []
        rows = yield Batch(tuple(Command(("HGETALL", keyspace.job_key(queue, i)))
                                 for i, _ in found))
        return [info_of(queue, i, _row(r), at) for (i, at), r in zip(found, rows, strict=True)
                if r]

    return calls()


class Standing(NamedTuple):
    """What one queue holds that a drain round acts on, read at one SERVER instant
    (``@standing``). ``claimable``: jobs wait on pending or on a ready group's lane;
    ``scheduled``: the schedule holds jobs (``with_scheduled`` makes them due); ``legs``:
    a beat's recovery legs have work now (a lapsed lease, a due run-at, gwait entry or
    deadline, flow completions or a stale flow admission); ``expired``: the queue's
    expired counter."""

    claimable: bool
    scheduled: bool
    legs: bool
    expired: int


@verb
def standing(queues: Sequence[str]) -> Verb[dict[str, Standing]]:
    """Each queue's ``Standing``, in ONE round trip (a ``@standing`` call per queue,
    pipelined): what lets a drain skip a beat that would find nothing (the legs' scripts,
    a claim of an empty queue). SERVER clock."""
    steps = tuple(Eval("standing", (keyspace.queue_key(q, "pending"),
                                    keyspace.queue_key(q, "active")), (keyspace.base(q),))
                  for q in queues)

    def calls() -> Verb[dict[str, Standing]]:
        # one queue (the common drain): a lone script call, cheaper than a pipeline of one
        replies = [(yield steps[0])] if len(steps) == 1 else (yield Batch(steps))
        out: dict[str, Standing] = {}
        for q, reply in zip(queues, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            claimable, scheduled, legs, expired = reply
            out[q] = Standing(bool(claimable), bool(scheduled), bool(legs), int(expired))
        return out

    return calls()
