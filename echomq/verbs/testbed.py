"""Reads and wipes a test bed needs (``echomq.testing``): the waiting jobs of a queue as
``JobInfo`` rows, and the flush that gives each test an empty keyspace. No clock."""

from __future__ import annotations

from typing import Any

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, scored, single, text, verb
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
