"""One queue at a glance (``QueueView``: counts, counters, ages and lags, the last hour),
and a partitioned queue's views folded into one. SERVER ms throughout."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from echomq.core import ids, keyspace, partitions
from echomq.core.steps import Batch, Command, Verb, scored, text, verb
from echomq.dashboard.insight.common import (
    SERIES_SLOTS,
    STATES,
    _dict,
    _int,
    _ms,
    _score,
    set_key,
)


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
        next_at = _score(first[0][1]) if first else None
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
