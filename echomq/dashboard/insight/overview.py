"""One queue at a glance (``QueueView``: counts, counters, ages and lags, the last hour),
a queue's throughput over the last day (``throughput``), and a partitioned queue's views
folded into one. SERVER ms throughout, except the HOST-clock hint a caller may give to
read the minute ring in the same round trip."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from echomq.core import ids, keyspace, partitions
from echomq.core.steps import Batch, Command, Verb, scored, text, verb
from echomq.dashboard.insight.common import (
    SERIES_RING,
    SERIES_SLOTS,
    STATES,
    as_fields,
    score_of,
    set_key,
    time_reply_ms,
    whole_or,
)

#: minutes read around a HOST-clock hint beyond the hour shown, each side: the ring reads
#: right while the host and the server agree within this much
HINT_SLACK_MIN = 5


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


def ring_fields(first_minute: int, last_minute: int) -> list[str]:
    """The ring's fields (``<slot>:t``, ``:c``, ``:f``) of the minutes first..last."""
    out = []
    for minute in range(first_minute, last_minute + 1):
        slot = minute % SERIES_RING
        out += [f"{slot}:t", f"{slot}:c", f"{slot}:f"]
    return out


def series_of(raw: dict[str, Any], now_ms: int, minutes: int = SERIES_SLOTS
              ) -> list[tuple[int, int, int]]:
    """The per-minute ring written by ``metrics.observe`` as the last ``minutes``, oldest
    first; a slot last written for another minute (a day ago, or never) reads as zero."""
    minute_now = now_ms // 60_000
    out = []
    for minute in range(minute_now - minutes + 1, minute_now + 1):
        slot = minute % SERIES_RING
        if whole_or(raw.get(f"{slot}:t"), -1) == minute:
            out.append((minute, whole_or(raw.get(f"{slot}:c")), whole_or(raw.get(f"{slot}:f"))))
        else:
            out.append((minute, 0, 0))
    return out


@verb
def overview(queue: str, near_ms: int | None = None) -> Verb[QueueView]:
    """Counts per state, the server-side counters, paused, ages and lags and the last
    hour's throughput: a fixed number of commands (no scan). ``near_ms``, the caller's
    HOST-clock now, lets the minute ring be read in the same round trip (the hour around
    it, ``HINT_SLACK_MIN`` each side, picked by the SERVER now); without it the server's
    ``TIME`` is read first (two round trips)."""
    q = keyspace.validate_queue(queue)
    sets = [set_key(q, s) for s in STATES]
    series_key = keyspace.queue_key(q, "series")

    def calls() -> Verb[QueueView]:
        if near_ms is None:
            near = time_reply_ms((yield Command(("TIME",))))
            slack = 1
        else:
            near, slack = int(near_ms), HINT_SLACK_MIN
        fields = ring_fields(near // 60_000 - SERIES_SLOTS + 1 - slack,
                             near // 60_000 + slack)
        replies = yield Batch((
            *(Command(("ZCARD", k)) for k in sets),
            Command(("HGETALL", keyspace.queue_key(q, "stats"))),
            Command(("EXISTS", keyspace.queue_key(q, "paused"))),
            Command(("ZRANGE", set_key(q, "scheduled"), 0, 0, "WITHSCORES")),
            Command(("ZRANGE", set_key(q, "pending"), 0, 0)),
            Command(("ZCARD", keyspace.queue_key(q, "repeat"))),
            Command(("SCARD", keyspace.queue_key(q, "groups"))),
            Command(("HGETALL", keyspace.queue_key(q, "metrics"))),
            Command(("HMGET", series_key, *fields)),
            Command(("TIME",)),
        ))
        for reply in replies:  # a key of the wrong type: refuse the whole view
            if isinstance(reply, Exception):
                raise reply
        n = len(STATES)
        counts = {s: int(c) for s, c in zip(STATES, replies[:n], strict=True)}
        (stats_raw, paused, head, pend, repeats, n_groups, metrics_raw, series_raw,
         now) = replies[n:]
        now_ms = time_reply_ms(now)
        first = scored(head)
        next_at = score_of(first[0][1]) if first else None
        lag = max(0, now_ms - next_at) if next_at is not None else 0
        ages = [lag] if lag > 0 else []
        if pend:
            with contextlib.suppress(ValueError):  # a hand-written id has no mint time
                ages.append(max(0, now_ms - ids.timestamp_ms(text(pend[0]))))
        return QueueView(
            queue=q,
            counts=counts,
            stats={text(k): whole_or(v) for k, v in as_fields(stats_raw).items()},
            paused=bool(int(paused)),
            now_ms=now_ms,
            oldest_due_age_ms=max(ages) if ages else None,
            promote_lag_ms=lag,
            registrations=int(repeats),
            groups=int(n_groups),
            next_run_at_ms=next_at,
            series=series_of(dict(zip(fields, series_raw or [], strict=False)), now_ms),
            metrics={k: text(v) for k, v in as_fields(metrics_raw).items()},
        )

    return calls()


@verb
def throughput(queue: str, minutes: int = SERIES_RING) -> Verb[list[tuple[int, int, int]]]:
    """The queue's last ``minutes`` (1..1440) of ``(minute, completed, failed)``, oldest
    first, from the minute ring ``metrics.observe`` keeps (SERVER clock): ``TIME``, then
    one ``HMGET``."""
    q = keyspace.validate_queue(queue)
    if not isinstance(minutes, int) or not 1 <= minutes <= SERIES_RING:
        raise ValueError(f"minutes must be an int in 1..{SERIES_RING}, got {minutes!r}")

    def calls() -> Verb[list[tuple[int, int, int]]]:
        now_ms = time_reply_ms((yield Command(("TIME",))))
        last = now_ms // 60_000
        fields = ring_fields(last - minutes + 1, last)
        got = yield Command(("HMGET", keyspace.queue_key(q, "series"), *fields))
        return series_of(dict(zip(fields, got or [], strict=False)), now_ms, minutes)

    return calls()


# -- partitioned queues: the partitions read one by one, folded here (pure, no I/O) --------

def fold_views(name: str, views: list[QueueView]) -> QueueView:
    """The views of a partitioned queue's partitions as one view named ``name``: counts,
    counters, registrations and groups summed, the series added minute by minute, the worst
    age and lag, ``paused`` when any partition is (each partition pauses on its own). SERVER
    ms throughout, like the views it folds."""
    if not views:
        raise ValueError("no partition to fold")
    ages = [v.oldest_due_age_ms for v in views if v.oldest_due_age_ms is not None]
    nexts = [v.next_run_at_ms for v in views if v.next_run_at_ms is not None]
    series: dict[int, tuple[int, int]] = {}
    for v in views:
        for minute, done, failed in v.series:
            d, f = series.get(minute, (0, 0))
            series[minute] = (d + done, f + failed)
    return QueueView(
        queue=name,
        counts=partitions.sum_counts(v.counts for v in views),
        stats=partitions.sum_counts(v.stats for v in views),
        paused=any(v.paused for v in views),
        now_ms=max(v.now_ms for v in views),
        oldest_due_age_ms=max(ages) if ages else None,
        promote_lag_ms=max(v.promote_lag_ms for v in views),
        registrations=sum(v.registrations for v in views),
        next_run_at_ms=min(nexts) if nexts else None,
        groups=sum(v.groups for v in views),
        series=[(m, d, f) for m, (d, f) in sorted(series.items())],
    )
