"""Batches: jobs on any queues that end together, with callbacks (on_complete, on_success,
on_death), each fired once as a job on its own queue.

A batch lives in its own slot, ``emq:{b:<id>}:`` (``meta``, ``pending``): its members may
sit on any queue, on any cluster slot, so a member's end cannot change the batch in the
same script as its ack. How the counts stay exact: a member is enrolled (``enroll``, after
``create``: its id on ``pending``, ``total`` raised) before it is admitted; when its end
lands on its own queue (ack, death, cancel), the worker that settled it sends ``settle`` to
the batch's slot, which counts it only if ``SREM`` took it off ``pending``. A notice sent
twice (a reply lost, a retry) counts once; the callbacks are flagged fired (``HSETNX``) in
the script that makes them due, so each is enqueued at most once, with a job id derived
from the batch's (``<batch id>.<kind>``), so a repeated enqueue is a ``duplicate``.

Callbacks fire only once the batch is closed (``close``: the ``with`` block ended):
``on_death`` at the first dead member, ``on_complete`` when every member ended (dead and
cancelled ones included), ``on_success`` when every member completed (never, once one died
or was cancelled). Each callback job is called with its signature's arguments and then the
batch's ``BatchInfo`` as a dict. A member that ends with no worker to tell (dead-lettered
by the reaper, expired past its deadline, cancelled while waiting or scheduled) has its end
written to its queue's flow outbox by the script that ends it (``includes/member.lua``),
and the flow carrier settles it here; expired members count with the cancelled ones. A
dead member revived and completed later does not change the counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.payload import encode
from echomq.core.steps import Batch, Command, Eval, Verb, native_or_script, single, verb
from echomq.verbs.jobs.admission import Options, _enqueue_step

KINDS = ("complete", "success", "death")
ENDINGS = ("completed", "dead", "cancelled", "expired")


class BatchInfo(NamedTuple):
    """A batch's counts: members enrolled (``total``), not yet ended (``pending``),
    ``completed``, ``dead``, and whether the batch is ``closed`` (its ``with`` block
    ended). Cancelled members are the rest: ``total - pending - completed - dead``."""

    total: int
    pending: int
    completed: int
    dead: int
    closed: bool

    def as_dict(self) -> dict[str, Any]:
        """The JSON-able form a callback receives."""
        return self._asdict()


class Callback(NamedTuple):
    """A batch callback to enqueue: the task's queue and name, its arguments, and its
    admission options (``priority``, ``group``)."""

    queue: str
    task: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}  # a NamedTuple default, never mutated
    priority: int = 0
    group: str | None = None

    def record(self) -> str:
        return json.dumps({"queue": self.queue, "task": self.task, "args": list(self.args),
                           "kwargs": self.kwargs, "priority": self.priority,
                           "group": self.group}, separators=(",", ":"), sort_keys=True)


def _keys(batch_id: str) -> tuple[str, str]:
    return keyspace.batch_key(batch_id, "meta"), keyspace.batch_key(batch_id, "pending")


@verb
def create(batch_id: str, callbacks: dict[str, Callback]) -> Verb[bool]:
    """Create batch ``batch_id``, open, with ``callbacks`` by kind (``complete``,
    ``success``, ``death``); ``False`` (nothing written) when it exists."""
    unknown = callbacks.keys() - set(KINDS)
    if unknown:
        raise ValueError(f"unknown batch callback kind(s): {sorted(unknown)}")
    args = [x for kind, cb in callbacks.items() for x in (kind, cb.record())]
    return single(Eval("batch_open", _keys(batch_id), tuple(args)), lambda r: int(r) == 1)


@verb
def enroll(batch_id: str, job_ids: Sequence[str]) -> Verb[int]:
    """Enroll ``job_ids`` as members (before they are admitted); the batch's total."""
    for job_id in job_ids:
        guard.string("job_id", job_id)
    return single(Eval("batch_enroll", _keys(batch_id), tuple(job_ids)), int)


def _fired(batch_id: str, reply: Sequence[Any]) -> Verb[BatchInfo]:
    """Decode a close/settle reply and enqueue the callbacks it made due."""
    info = BatchInfo(int(reply[0]), int(reply[1]), int(reply[2]), int(reply[3]),
                     int(reply[5]) == 1)
    steps = []
    for i in range(6, len(reply), 2):
        kind = reply[i].decode() if isinstance(reply[i], bytes) else str(reply[i])
        rec = json.loads(reply[i + 1])
        payload = encode(rec["task"], [*rec["args"], info.as_dict()], rec["kwargs"])
        steps.append(_enqueue_step(rec["queue"], f"{batch_id}.{kind}", payload,
                                   Options.of(rec.get("priority") or 0, rec.get("group"))))
    for step in steps:  # each on its own queue's slot
        yield from native_or_script(step)
    return info


@verb
def close(batch_id: str) -> Verb[BatchInfo]:
    """Close the batch (its ``with`` block ended) and enqueue the callbacks due now."""
    def calls() -> Verb[BatchInfo]:
        reply = yield Eval("batch_close", _keys(batch_id), ())
        return (yield from _fired(batch_id, reply))

    return calls()


@verb
def settle(batch_id: str, ended: Sequence[tuple[str, str]]) -> Verb[BatchInfo]:
    """Count ``ended`` members (``(job id, "completed" | "dead" | "cancelled" |
    "expired")``), each once, and enqueue the callbacks that made due."""
    first: dict[str, str] = {}  # a member named twice ends the first way named
    for job_id, outcome in ended:
        if outcome not in ENDINGS:
            raise ValueError(f"a member ends {', '.join(ENDINGS)}, not {outcome!r}")
        first.setdefault(guard.string("job_id", job_id), outcome)
    by_outcome: dict[str, list[str]] = {}
    for job_id, outcome in first.items():
        by_outcome.setdefault(outcome, []).append(job_id)
    # one group per outcome: the script takes each group off pending with one SREM
    args = [x for outcome, ids in by_outcome.items() for x in (outcome, str(len(ids)), *ids)]

    def calls() -> Verb[BatchInfo]:
        reply = yield Eval("batch_settle", _keys(batch_id), tuple(args))
        return (yield from _fired(batch_id, reply))

    return calls()


@verb
def info(batch_id: str) -> Verb[BatchInfo | None]:
    """The batch's ``BatchInfo``; ``None`` for an unknown (or expired) batch."""
    meta, pending = _keys(batch_id)

    def calls() -> Verb[BatchInfo | None]:
        m, left = yield Batch((Command(("HMGET", meta, "total", "completed", "dead",
                                        "closed")), Command(("SCARD", pending))))
        if m[0] is None:
            return None
        return BatchInfo(int(m[0]), int(left), int(m[1] or 0), int(m[2] or 0),
                         m[3] in (b"1", "1"))

    return calls()


@verb
def fired(batch_id: str) -> Verb[list[str]]:
    """The kinds of the batch's callbacks that fired (``complete``, ``success``,
    ``death``), in that order."""
    meta, _ = _keys(batch_id)
    flags = tuple(f"fired_{k}" for k in KINDS)
    return single(Command(("HMGET", meta, *flags)),
                  lambda r: [k for k, v in zip(KINDS, r, strict=True) if v is not None])
