"""Reads and wipes a test bed needs (``echomq.testing``): the waiting jobs of a queue as
``JobInfo`` rows, the flush that gives each test an empty keyspace, and ``standing``: what
a drain round would find to do on each queue, in one round trip. Clock: ``standing``
reads the SERVER clock (``TIME``); the rest none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import keyspace, readings
from echomq.core.steps import Batch, Command, Nodes, Step, Verb, scored, single, text, verb
from echomq.verbs.jobs import Due, next_due
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
    """What one queue holds that a drain round acts on, read at one SERVER instant.

    ``claimable``: jobs wait on pending or on a ready group's lane (a claim may take one);
    ``scheduled``: the schedule holds jobs (``with_scheduled`` makes them due);
    ``legs``: a beat's recovery legs have work: a lease lapsed (reap), something is due
    by time alone (promote, a group or a pause reopening, the deadline sweep: the
    ``next_due`` a beat reads), flow completions wait in the outbox or an admission
    missed its deadline (the flow carrier); ``expired``: the queue's expired counter."""

    claimable: bool
    scheduled: bool
    legs: bool
    expired: int


def _past(head: Any, now: int) -> bool:
    """Whether a ``ZRANGE 0 0 WITHSCORES`` head is scored at or before ``now`` (ms)."""
    first = scored(head)
    return bool(first) and readings.score_ms(first[0][1]) <= now


@verb
def standing(queues: Sequence[str]) -> Verb[dict[str, Standing]]:
    """Each queue's ``Standing``, every read in ONE pipelined round trip (the queues'
    ``next_due`` reads ride along). What lets a drain skip a beat that would find nothing:
    the legs' four scripts, and a claim of an empty queue. SERVER clock."""
    own: list[Command] = [Command(("TIME",))]
    for q in queues:
        base = keyspace.base(q)
        own += [Command(("ZCARD", base + "pending")), Command(("ZCARD", base + "ring")),
                Command(("ZCARD", base + "schedule")),
                Command(("ZRANGE", base + "active", 0, 0, "WITHSCORES")),
                Command(("XLEN", base + "flow:outbox")),
                Command(("ZRANGE", base + "flows:open", 0, 0, "WITHSCORES")),
                Command(("HGET", base + "stats", "expired"))]
    width = (len(own) - 1) // max(1, len(queues))

    def calls() -> Verb[dict[str, Standing]]:
        replies, dues = yield from alongside(Batch(tuple(own)), [next_due.steps(q)
                                                                  for q in queues])
        secs, micros = replies[0]
        now = int(secs) * 1000 + int(micros) // 1000
        out: dict[str, Standing] = {}
        for i, q in enumerate(queues):
            pending, ring, schedule, active, outbox, opened, expired = (
                replies[1 + i * width:1 + (i + 1) * width])
            due: Due = dues[i]
            legs = (_past(active, now) or (due.ms is not None and due.ms <= 0)
                    or int(outbox) > 0 or _past(opened, now))
            out[q] = Standing(int(pending) + int(ring) > 0, int(schedule) > 0, legs,
                              readings.whole(expired) or 0)
        return out

    return calls()


def alongside(first: Batch, verbs: Sequence[Verb[Any]]) -> Verb[tuple[list[Any], list[Any]]]:
    """Drive ``first`` and ``verbs`` side by side: ``first``'s steps and each verb's first
    step (a read: a ``Command`` or a ``Batch`` of them) go out as ONE batch; a verb that
    needs more round trips goes on alone after. Returns ``first``'s replies and each
    verb's value, in order."""
    steps, spans = list(first.steps), []
    for v in verbs:
        step = next(v)
        if isinstance(step, Nodes):
            raise TypeError("a per-node step cannot ride a pipelined batch")
        parts = step.steps if isinstance(step, Batch) else (step,)
        spans.append((len(steps), len(parts), isinstance(step, Batch)))
        steps += parts
    replies = yield Batch(tuple(steps))
    values = []
    for v, (at, n, batched) in zip(verbs, spans, strict=True):
        values.append((yield from _resume(v, replies[at:at + n] if batched else replies[at])))
    return replies[:len(first.steps)], values


def _resume(v: Verb[Any], reply: Any) -> Verb[Any]:
    """Go on driving ``v`` from ``reply`` (to the step it yielded first): a refusal in a
    batch slot is thrown in, as the driver throws a lone step's."""
    try:
        step: Step = v.throw(reply) if isinstance(reply, Exception) else v.send(reply)
        while True:
            try:
                got = yield step
            except Exception as exc:  # handed to the verb, as the driver hands it
                step = v.throw(exc)
            else:
                step = v.send(got)
    except StopIteration as stop:
        return stop.value
