"""Read verbs for the surfaces (dashboard, ``/metrics``): what a queue looks like now.

Every verb here is bounded: a fixed number of commands per call whatever the queue's size
(``ZCARD``, ``ZCOUNT``, ``ZRANK``, ranged ``ZRANGE`` with a limit, ``HMGET`` of a page),
never a scan of a set or of the keyspace. Like the transitions, each verb runs on either
connector.

Clocks: ``now_ms`` in every view is the SERVER clock (``TIME``, read in the same round
trip), the clock the schedule, leases and death times are priced on; ages and lags are
SERVER now minus a stored SERVER score. The age of the head of ``pending`` is SERVER now
minus its id's mint time (HOST ms of the producer that minted it).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from . import _guards as guard
from . import ids, keyspace
from .steps import Batch, Command, Eval, Verb, pairs, scored, single, text, verb

#: the job states a surface lists, each with the sorted set that holds it
STATES = ("pending", "scheduled", "active", "completed", "dead", "cancelled",
          "waiting-children")
SET_OF = {"scheduled": "schedule"}
#: states listed newest first (scored by the SERVER ms they ended)
NEWEST_FIRST = frozenset({"completed", "dead", "cancelled"})
#: per-minute series kept by ``metrics.observe`` (slots of one minute, a ring of an hour)
SERIES_SLOTS = 60
PAGE_MAX = 200


def set_key(queue: str, state: str) -> str:
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    return keyspace.queue_key(queue, SET_OF.get(state, state))


def _ms(reply: Any) -> int:
    secs, micros = reply
    return int(secs) * 1000 + int(micros) // 1000


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(float(text(value))) if value is not None else default
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class QueueView:
    """One queue at a glance (all times SERVER ms)."""

    queue: str
    counts: dict[str, int]
    stats: dict[str, int]
    paused: bool
    now_ms: int
    oldest_due_age_ms: int | None
    promote_lag_ms: int
    registrations: int
    next_run_at_ms: int | None
    groups: int  # groups seen on the queue (their jobs wait in lanes, not in pending)
    #: the last hour per minute, oldest first: (minute, completed, failed)
    series: list[tuple[int, int, int]] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)


def series_of(raw: dict[str, Any], now_ms: int) -> list[tuple[int, int, int]]:
    """The per-minute ring written by ``metrics.observe`` as the last hour, oldest first;
    a slot last written in another hour reads as zero."""
    minute_now = now_ms // 60_000
    out = []
    for minute in range(minute_now - SERIES_SLOTS + 1, minute_now + 1):
        slot = minute % SERIES_SLOTS
        if _int(raw.get(f"{slot}:t"), -1) == minute:
            out.append((minute, _int(raw.get(f"{slot}:c")), _int(raw.get(f"{slot}:f"))))
        else:
            out.append((minute, 0, 0))
    return out


@verb
def overview(queue: str) -> Verb[QueueView]:
    """Counts per state, the server-side counters, paused, ages and lags: one round trip of
    a fixed number of commands (no scan)."""
    q = keyspace.validate_queue(queue)
    sets = [set_key(q, s) for s in STATES]

    def calls() -> Verb[QueueView]:
        replies = yield Batch((
            *(Command(("ZCARD", k)) for k in sets),
            Command(("HGETALL", keyspace.queue_key(q, "stats"))),
            Command(("EXISTS", keyspace.queue_key(q, "paused"))),
            Command(("ZRANGE", set_key(q, "scheduled"), 0, 0, "WITHSCORES")),
            Command(("ZRANGE", set_key(q, "pending"), 0, 0)),
            Command(("ZCARD", keyspace.queue_key(q, "repeat"))),
            Command(("SCARD", keyspace.queue_key(q, "groups"))),
            Command(("HGETALL", keyspace.queue_key(q, "metrics"))),
            Command(("HGETALL", keyspace.queue_key(q, "series"))),
            Command(("TIME",)),
        ))
        for reply in replies:  # a key of the wrong type: refuse the whole view
            if isinstance(reply, Exception):
                raise reply
        n = len(STATES)
        counts = {s: int(c) for s, c in zip(STATES, replies[:n], strict=True)}
        (stats_raw, paused, head, pend, repeats, n_groups, metrics_raw, series_raw,
         now) = replies[n:]
        now_ms = _ms(now)
        first = scored(head)
        next_at = int(float(first[0][1])) if first else None
        lag = max(0, now_ms - next_at) if next_at is not None else 0
        ages = [lag] if lag > 0 else []
        if pend:
            with contextlib.suppress(ValueError):  # a hand-written id has no mint time
                ages.append(max(0, now_ms - ids.timestamp_ms(text(pend[0]))))
        return QueueView(
            queue=q,
            counts=counts,
            stats={text(k): _int(v) for k, v in _dict(stats_raw).items()},
            paused=bool(int(paused)),
            now_ms=now_ms,
            oldest_due_age_ms=max(ages) if ages else None,
            promote_lag_ms=lag,
            registrations=int(repeats),
            groups=int(n_groups),
            next_run_at_ms=next_at,
            series=series_of(_dict(series_raw), now_ms),
            metrics={k: text(v) for k, v in _dict(metrics_raw).items()},
        )

    return calls()


def _dict(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return pairs(reply or [])


_ROW_FIELDS = ("state", "attempts", "error", "payload", "failures", "delays", "group",
               "priority", "progress")


def preview(payload: Any, limit: int = 120) -> tuple[str | None, str]:
    """``(task name, arguments preview)`` of a payload: the friendly layer's JSON
    ``{"task", "args", "kwargs"}`` when it is that, else the raw text, cut at ``limit``."""
    if payload is None:
        return None, ""
    raw = payload if isinstance(payload, bytes) else str(payload).encode()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        args = [json.dumps(a, ensure_ascii=False) for a in body.get("args") or []]
        kwargs = body.get("kwargs") or {}
        if isinstance(kwargs, dict):
            args += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
        shown = ", ".join(args)
    else:
        return None, _cut(raw.decode(errors="replace"), limit)
    return body["task"], _cut(shown, limit)


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Page:
    """A page of one state's jobs and the cursor of the next page (``None``: last page)."""

    state: str
    entries: list[dict[str, Any]]
    next_cursor: str | None
    total: int
    now_ms: int


def _cursor(score: int, job_id: str) -> str:
    return f"{score}~{job_id}"


def parse_cursor(cursor: str) -> tuple[int, str]:
    score, sep, job_id = cursor.partition("~")
    if not sep:
        raise ValueError(f"not a page cursor: {cursor!r}")
    try:
        return int(score), job_id
    except ValueError:
        raise ValueError(f"not a page cursor: {cursor!r}") from None


@verb
def page(queue: str, state: str, after: str | None = None, count: int = 50) -> Verb[Page]:
    """The ``count`` jobs of ``state`` after cursor ``after`` (``None``: the first page).

    Order: claim order for ``pending``, run-at for ``scheduled``, lease expiry for
    ``active``, newest first for the finished states. The cursor is ``score~id`` of the
    last entry shown: the next page starts just after that id's rank (``ZRANK``, O(log N)),
    or, if the id left the set meanwhile, at its score (``ZCOUNT``, O(log N); jobs tied at
    that score may show again, none is skipped); never an offset walk. Three round trips
    at most, each of a bounded number of commands.
    """
    key = set_key(queue, state)
    guard.positive("count", count)
    count = min(count, PAGE_MAX)
    rev = state in NEWEST_FIRST
    mark = parse_cursor(after) if after is not None else None

    def calls() -> Verb[Page]:
        start = 0
        if mark is not None:
            score, job_id = mark
            rank_cmd = "ZREVRANK" if rev else "ZRANK"
            span = ("(" + str(score), "+inf") if rev else ("-inf", "(" + str(score))
            rank, before = yield Batch((
                Command((rank_cmd, key, job_id)),
                Command(("ZCOUNT", key, *span)),
            ))
            # gone meanwhile: restart at its score (what sorts strictly before it was shown;
            # ties at that score may show again, none is skipped)
            start = int(rank) + 1 if rank is not None else int(before)
        read = "ZREVRANGE" if rev else "ZRANGE"
        members, total, now = yield Batch((
            Command((read, key, start, start + count, "WITHSCORES")),
            Command(("ZCARD", key)),
            Command(("TIME",)),
        ))
        got = [(text(m), int(float(s))) for m, s in scored(members)]
        more = len(got) > count
        got = got[:count]
        entries: list[dict[str, Any]] = []
        if got:
            rows = yield Batch(tuple(
                Command(("HMGET", keyspace.job_key(queue, i), *_ROW_FIELDS)) for i, _ in got
            ))
            for (job_id, score), row in zip(got, rows, strict=True):
                values = dict(zip(_ROW_FIELDS, row if isinstance(row, list) else
                                  [None] * len(_ROW_FIELDS), strict=True))
                task, args = preview(values.pop("payload"))
                entry: dict[str, Any] = {"id": job_id, "score": score, "task": task,
                                         "args": args}
                for k, v in values.items():
                    entry[k] = None if v is None else (
                        _int(v) if k in ("attempts", "failures", "delays", "priority")
                        else text(v))
                entries.append(entry)
        cursor = _cursor(got[-1][1], got[-1][0]) if more and got else None
        return Page(state, entries, cursor, int(total), _ms(now))

    return calls()


@verb
def job(queue: str, job_id: str) -> Verb[dict[str, Any] | None]:
    """A job's row (``payload`` as bytes, the rest as str) with ``result`` (the kept return
    value, bytes or ``None``), ``has_children`` (a flow parent), ``score`` (its score on its
    state's set: run-at, lease expiry, or the SERVER ms it ended; ``None`` when not on it)
    and ``now_ms`` (SERVER); ``None`` when there is no row. Two round trips."""
    guard.string("job_id", job_id)
    row_key = keyspace.job_key(queue, job_id)

    def calls() -> Verb[dict[str, Any] | None]:
        row, result, kids, now = yield Batch((
            Command(("HGETALL", row_key)),
            Command(("GET", keyspace.queue_key(queue, f"result:{job_id}"))),
            Command(("EXISTS", keyspace.queue_key(queue, f"kids:{job_id}"))),
            Command(("TIME",)),
        ))
        fields = _dict(row)
        if not fields:
            return None
        out: dict[str, Any] = {k: (v if k == "payload" else text(v)) for k, v in fields.items()}
        state = out.get("state")
        score = None
        if state in STATES:
            key = set_key(queue, state)
            if state == "pending" and out.get("group"):
                key = keyspace.lane_key(queue, out["group"])
            found = yield Command(("ZSCORE", key, job_id))
            score = int(float(found)) if found is not None else None
        out["result"] = result
        out["has_children"] = bool(int(kids))
        out["score"] = score
        out["now_ms"] = _ms(now)
        return out

    return calls()


@dataclass(frozen=True, slots=True)
class Release:
    """What a promote at SERVER ms ``at`` would release: how many, and the first few."""

    at_ms: int
    count: int
    first: list[tuple[str, int]]
    scheduled: int
    now_ms: int


@verb
def release_at(queue: str, at_ms: int, limit: int = 20) -> Verb[Release]:
    """How many scheduled jobs are due at ``at_ms`` (run-at <= at, as ``promote`` decides on
    the SERVER clock) and the first ``limit`` of them: ``ZCOUNT`` + one ranged read."""
    key = set_key(queue, "scheduled")
    guard.integer("at_ms", at_ms)
    guard.positive("limit", limit)
    limit = min(limit, PAGE_MAX)

    def calls() -> Verb[Release]:
        n, first, total, now = yield Batch((
            Command(("ZCOUNT", key, "-inf", at_ms)),
            Command(("ZRANGE", key, "-inf", at_ms, "BYSCORE", "LIMIT", 0, limit, "WITHSCORES")),
            Command(("ZCARD", key)),
            Command(("TIME",)),
        ))
        head = [(text(m), int(float(s))) for m, s in scored(first)]
        return Release(at_ms, int(n), head, int(total), _ms(now))

    return calls()


@dataclass(frozen=True, slots=True)
class Timeline:
    """The first ``limit`` scheduled jobs by run-at (``(id, run_at_ms)``), how many are
    scheduled in all, and SERVER now."""

    entries: list[tuple[str, int]]
    total: int
    now_ms: int


@verb
def timeline(queue: str, limit: int = 500) -> Verb[Timeline]:
    """The soonest ``limit`` scheduled jobs (one ranged read, ``ZCARD`` and ``TIME``)."""
    key = set_key(queue, "scheduled")
    guard.positive("limit", limit)

    def calls() -> Verb[Timeline]:
        first, total, now = yield Batch((
            Command(("ZRANGE", key, 0, limit - 1, "WITHSCORES")),
            Command(("ZCARD", key)),
            Command(("TIME",)),
        ))
        return Timeline([(text(m), int(float(s))) for m, s in scored(first)], int(total),
                        _ms(now))

    return calls()


@verb
def run_now(queue: str, job_id: str) -> Verb[bool]:
    """Make a scheduled job due now: its run-at becomes SERVER now (``ZADD XX``, so a job
    that left the schedule meanwhile is not re-added); the next promote releases it.
    ``False`` when it was not scheduled."""
    guard.string("job_id", job_id)
    key = set_key(queue, "scheduled")

    def calls() -> Verb[bool]:
        now = _ms((yield Command(("TIME",))))
        changed = yield Command(("ZADD", key, "XX", "CH", now, job_id))
        if int(changed):
            return True
        return (yield Command(("ZSCORE", key, job_id))) is not None

    return calls()


@verb
def discard(queue: str, job_id: str) -> Verb[bool]:
    """Delete a job that is not running: its row, its entry on its state's set (or lane),
    its kept result and the unique key it owns, atomically (the ``discard`` script).
    ``False`` when there was no row. Refusals: ``KindError`` (not a JOB id), ``StateError``
    (``EMQSTATE discard active``: cancel a running job instead)."""
    guard.string("job_id", job_id)
    step = Eval(
        "discard",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, f"result:{job_id}")),
        (keyspace.base(queue), job_id),
    )
    return single(step, lambda reply: bool(int(reply)))


@dataclass(frozen=True, slots=True)
class GroupPage:
    """A page of a queue's groups (``groups.GroupStats`` each) and the ``SSCAN`` cursor of
    the next page (``None``: the last one)."""

    groups: dict[str, Any]
    next_cursor: str | None


@verb
def group_page(queue: str, cursor: str = "0", count: int = 100) -> Verb[GroupPage]:
    """Up to about ``count`` groups of ``queue`` with their stats, from ``SSCAN`` cursor
    ``cursor``: two round trips of a bounded number of commands, however many groups the
    queue has (``groups.stats`` reads them all)."""
    from .groups import GroupStats

    guard.positive("count", count)
    count = min(count, PAGE_MAX)
    if not cursor.isdigit():
        raise ValueError(f"not a group cursor: {cursor!r}")
    members = keyspace.queue_key(queue, "groups")

    def num(value: Any) -> int | None:
        return None if value is None else int(value)

    def calls() -> Verb[GroupPage]:
        nxt, names = yield Command(("SSCAN", members, cursor, "COUNT", count))
        # a small set answers whole (at most set-max-listpack-entries, 128 by default), a
        # large one about ``count`` at a time: bounded either way
        names = sorted({text(n) for n in names})
        out: dict[str, Any] = {}
        if names:
            replies = yield Batch(tuple(
                step for g in names for step in (
                    Command(("ZCARD", keyspace.lane_key(queue, g))),
                    Command(("HMGET", keyspace.group_key(queue, g), "active", "limit",
                             "paused", "rate_max", "rate_ms")),
                )))
            for i, g in enumerate(names):
                waiting, (active, limit, paused, rmax, rms) = replies[2 * i], replies[2 * i + 1]
                out[g] = GroupStats(int(waiting), int(active or 0), num(limit),
                                    paused is not None, num(rmax), num(rms))
        more = text(nxt)
        return GroupPage(out, None if more == "0" else more)

    return calls()
