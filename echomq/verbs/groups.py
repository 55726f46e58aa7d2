"""Groups: fair lanes per tenant, concurrency caps and rate limits, all on the server.

A job admitted with ``group=`` waits on its group's lane ``emq:{q}:g:<group>:pending``
(scored by priority, then mint order). A group is *ready* when its lane has jobs, it is not
paused, it is under its concurrency limit and no rate window blocks it; the ring
``emq:{q}:ring`` holds exactly the ready groups, in turn order, and every claim serves flat
pending and the ring's head group alternately, so a tenant with 10,000 waiting jobs takes
turns with one that has 10. The controls below change a group's meta hash
``emq:{q}:g:<group>`` and re-check its place on the ring in the same script.

Rate limits are a sliding-window log of claim starts, read on the SERVER clock inside the
claim: exact ("never more than ``max_jobs`` starts in any window of ``per_ms``"), at the
cost of one zset entry per start inside the window (a token bucket would allow bursts at a
window edge; the log never does). A group whose window is full waits on ``emq:{q}:gwait``,
scored by the SERVER ms it reopens; ``jobs.next_due_ms`` reports that instant so idle
consumers wake then instead of polling.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace, readings
from echomq.core.steps import Batch, Command, Eval, Verb, single, text, verb
from echomq.verbs.jobs import rate_args
from echomq.verbs.jobs.control import until_arg


class GroupStats(NamedTuple):
    """A group's state: jobs waiting on its lane, jobs active, its concurrency limit
    (``None``: none), whether it is paused, and its rate (``None`` when it has none)."""

    waiting: int
    active: int
    limit: int | None
    paused: bool
    rate_max: int | None = None
    rate_per_ms: int | None = None
    paused_until: int | None = None  # when a pause with an end ends (SERVER ms)
    weight: int = 1  # its turns in the ring per round (set_weight)


def check_group_name(group: str) -> str:
    """``group`` checked as one group's name: ``*`` is refused (a control names one group;
    the defaults for every group of a queue are ``set_defaults``, or a task's
    ``group_limit=``/``group_rate=``)."""
    keyspace.validate_group(group)
    if "*" in group:
        raise ValueError(f"group {group!r}: a control names one group, not a pattern; for "
                         "every group of the queue set its defaults (groups.set_defaults, "
                         "or @app.task(group_limit=..., group_rate=...))")
    return group


def _control(queue: str, group: str, *args: str) -> Eval:
    check_group_name(group)
    return Eval(
        "group",
        (keyspace.group_key(queue, group), keyspace.queue_key(queue, "ring")),
        (keyspace.base(queue), group, *args),
    )


@verb
def pause(queue: str, group: str, until: int | dt.datetime | None = None) -> Verb[None]:
    """Pause a group: it keeps its jobs (and receives promoted ones) and releases none.

    ``until`` (epoch ms or a ``datetime``, SERVER clock): the pause ends by itself at that
    instant and the idle consumers wake for it; one already past resumes the group."""
    end = until_arg(until)
    return single(_control(queue, group, "pause", *((end,) if end else ())), lambda _: None)


@verb
def resume(queue: str, group: str) -> Verb[None]:
    """Resume a paused group: it rejoins the ring at once if it has work (and wakes)."""
    return single(_control(queue, group, "resume"), lambda _: None)


@verb
def set_limit(queue: str, group: str, concurrency: int | None) -> Verb[None]:
    """At most ``concurrency`` (>= 1) of the group's jobs active at once; ``None``: no limit."""
    if concurrency is not None:
        guard.positive("concurrency", concurrency)
    arg = "" if concurrency is None else str(concurrency)
    return single(_control(queue, group, "limit", arg), lambda _: None)


@verb
def set_rate(queue: str, group: str, max_jobs: int, per_ms: int) -> Verb[None]:
    """At most ``max_jobs`` of the group's claims start in any window of ``per_ms`` ms
    (SERVER clock, sliding-window log: exact)."""
    mx, ms = rate_args(max_jobs, per_ms)
    return single(_control(queue, group, "rate", mx, ms), lambda _: None)


@verb
def set_weight(queue: str, group: str, weight: int) -> Verb[None]:
    """The group's share of turns in the ring (an int >= 1, default 1): while it stays
    ready it keeps the head for ``weight`` consecutive claims before going to the back, so
    two always-busy groups of weights 3 and 1 get 3/4 and 1/4 of the ring's claims. Weight
    buys turns, not time: a slow tenant still needs a limit (``set_limit``)."""
    guard.positive("weight", weight)
    return single(_control(queue, group, "weight", str(weight)), lambda _: None)


@verb
def clear_rate(queue: str, group: str) -> Verb[None]:
    """Remove the group's rate (a block already on ``gwait`` runs its course)."""
    return single(_control(queue, group, "rate", "", ""), lambda _: None)


@verb
def set_defaults(queue: str, limit: int | None = None,
                 rate: tuple[int, int] | None = None) -> Verb[None]:
    """The defaults every group of ``queue`` takes where its own meta sets nothing: a
    concurrency ``limit`` (>= 1) and a ``rate`` ``(max_jobs, per_ms)``; ``None`` for none.
    A group's own ``set_limit``/``set_rate`` wins for that group. Every group's ring place
    is re-checked in the same script (``group_defaults``). An ungrouped queue never reads
    them."""
    if limit is not None:
        guard.positive("limit", limit)
    mx, ms = ("", "") if rate is None else rate_args(*rate)
    step = Eval("group_defaults", (keyspace.queue_key(queue, "gdefaults"),),
                (keyspace.base(queue), "" if limit is None else str(limit), mx, ms))
    return single(step, lambda _: None)


class GroupDefaults(NamedTuple):
    """A queue's group defaults (``set_defaults``): ``None`` where none is set."""

    limit: int | None
    rate_max: int | None
    rate_per_ms: int | None


@verb
def defaults(queue: str) -> Verb[GroupDefaults]:
    """The queue's group defaults (``set_defaults``)."""
    key = keyspace.queue_key(queue, "gdefaults")
    return single(Command(("HMGET", key, "limit", "rate_max", "rate_ms")),
                  lambda r: GroupDefaults(*(_int(v) for v in r)))


def _int(value: Any) -> int | None:
    return readings.whole(value)  # a field another client garbled reads as unset


@verb
def seen(queues: Sequence[str]) -> Verb[dict[str, int]]:
    """How many groups each of ``queues`` has seen (``stats`` names them), in one
    pipelined round trip: which queues a worker starting on many has groups to tell of."""
    names = list(queues)
    if not names:
        return {}
    replies = yield Batch(tuple(Command(("SCARD", keyspace.queue_key(q, "groups")))
                                for q in names))
    return {q: int(n) for q, n in zip(names, replies, strict=True)
            if not isinstance(n, Exception)}


@verb
def stats(queue: str) -> Verb[dict[str, GroupStats]]:
    """Every group seen on ``queue`` (admitted with it, or given a control) with its
    ``GroupStats``; two round trips."""
    members = keyspace.queue_key(queue, "groups")

    def calls() -> Verb[dict[str, GroupStats]]:
        names = sorted(text(n) for n in (yield Command(("SMEMBERS", members))))
        if not names:
            return {}
        steps: list[Command] = []
        for g in names:
            steps.append(Command(("ZCARD", keyspace.lane_key(queue, g))))
            steps.append(Command(("HMGET", keyspace.group_key(queue, g), "active", "limit",
                                  "paused", "rate_max", "rate_ms", "paused_until", "weight")))
        replies = yield Batch(tuple(steps))
        out: dict[str, GroupStats] = {}
        for i, g in enumerate(names):
            waiting, (active, limit, paused, rmax, rms, until, weight) = (
                replies[2 * i], replies[2 * i + 1])
            out[g] = GroupStats(int(waiting), _int(active) or 0, _int(limit),
                                paused is not None, _int(rmax), _int(rms), _int(until),
                                _int(weight) or 1)
        return out

    return calls()
