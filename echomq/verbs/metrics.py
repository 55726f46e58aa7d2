"""Server-side runtime metrics: what consumers report so any dashboard sees the fleet.

The transitions count jobs themselves (``emq:{q}:stats``: completed, failed, retried, dead,
cancelled, enqueued). What only the runtime knows, it reports here: each handler run's
duration (a histogram), the last beat's duration, the degraded streak, and per-minute
completed/failed counts in a ring of a day's minutes (the dashboard's sparklines and
throughput charts). The runtime's ``Meter`` (``echomq.runtime.meter``) gathers them in the
consumer's memory and ``observe`` folds them into ``emq:{q}:metrics`` and
``emq:{q}:series`` in one script call, at most once a second per consumer (so the cost is
one round trip a second, whatever the job rate).

Clocks: durations are HOST monotonic seconds; the minute ring is keyed on the SERVER clock
(``TIME`` inside the script).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from echomq.core import keyspace, readings
from echomq.core.steps import Command, Eval, Verb, pairs, single, text, verb

#: upper bounds (seconds) of the handler-duration histogram; +Inf is implied after them
BUCKETS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                                10.0, 30.0, 60.0)
#: the minute ring's slots (a day of minutes; ``observe-2.lua`` prices the slot the same)
SERIES_RING = 1440


def bucket_counts(durations_s: Sequence[float]) -> list[int]:
    """How many of ``durations_s`` fall in each bucket (``len(BUCKETS_S) + 1`` counts, the
    last one +Inf); a duration equal to a bound counts in that bound's bucket (``le``)."""
    counts = [0] * (len(BUCKETS_S) + 1)
    for d in durations_s:
        counts[bisect.bisect_left(BUCKETS_S, d)] += 1
    return counts


@verb
def observe(
    queue: str,
    durations_s: Sequence[float] = (),
    *,
    completed: int = 0,
    failed: int = 0,
    beat_s: float | None = None,
    degraded: int | None = None,
) -> Verb[None]:
    """Fold one consumer's numbers since its last call into the queue's server-side
    metrics (the ``observe`` script): handler durations (seconds), jobs completed and
    failed, the last beat's seconds and the current degraded streak."""
    for name, n in (("completed", completed), ("failed", failed)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    if any(d < 0 for d in durations_s):
        raise ValueError("durations must be >= 0")
    step = Eval(
        "observe",
        (keyspace.queue_key(queue, "metrics"), keyspace.queue_key(queue, "series")),
        (
            str(completed),
            str(failed),
            repr(float(sum(durations_s))),
            str(len(durations_s)),
            "-1" if beat_s is None else repr(float(beat_s)),
            "-1" if degraded is None else str(int(degraded)),
            *(str(n) for n in bucket_counts(durations_s)),
        ),
    )
    return single(step, lambda _: None)


@dataclass(frozen=True, slots=True)
class Observed:
    """The runtime's numbers for one queue, as ``observe`` left them."""

    buckets: list[int]  # per bucket (not cumulative), +Inf last
    duration_sum_s: float
    duration_count: int
    beat_last_s: float | None
    beat_sum_s: float
    beat_count: int
    degraded: int
    at_ms: int | None  # SERVER ms of the last observe


def observed(raw: dict[str, Any]) -> Observed:
    """An ``Observed`` from the ``emq:{q}:metrics`` hash's fields (``str`` keys)."""

    def num(key: str, default: float = 0.0) -> float:
        # a field another client wrote (no number, nan, inf) reads as the default: the
        # exposition must still render (core.readings)
        got = readings.number(raw.get(key))
        return default if got is None or not math.isfinite(got) else got

    beat_last = num("beat:last", -1.0)
    return Observed(
        buckets=[int(num(f"h:{i}")) for i in range(len(BUCKETS_S) + 1)],
        duration_sum_s=num("h:sum"),
        duration_count=int(num("h:count")),
        beat_last_s=None if beat_last < 0 else beat_last,
        beat_sum_s=num("beat:sum"),
        beat_count=int(num("beat:count")),
        degraded=int(num("degraded")),
        at_ms=readings.score_ms(num("at")) if "at" in raw else None,
    )


@verb
def read(queue: str) -> Verb[Observed]:
    """The queue's runtime metrics (one ``HGETALL``)."""
    key = keyspace.queue_key(queue, "metrics")

    def decode(reply: Any) -> Observed:
        raw = {text(k): v for k, v in reply.items()} if isinstance(reply, dict) else pairs(
            reply or [])
        return observed(raw)

    return single(Command(("HGETALL", key)), decode)


@verb
def last_minute(queue: str) -> Verb[tuple[float, float]]:
    """Jobs of ``queue`` completed and failed in the last 60 s, fleet-wide, from the
    per-minute ring ``observe`` keeps (SERVER clock): this minute's counts plus the
    previous minute's, weighted by the share of it still inside the window. Workers fold
    their counts in about once a second, so the figure trails by that much."""
    key = keyspace.queue_key(queue, "series")

    def calls() -> Verb[tuple[float, float]]:
        secs, micros = yield Command(("TIME",))
        now = int(secs) * 1000 + int(micros) // 1000
        minute, into = divmod(now, 60_000)
        fields = [f"{m % SERIES_RING}:{f}" for m in (minute, minute - 1) for f in "tcf"]
        got = yield Command(("HMGET", key, *fields))
        ring = {k: v for k, v in zip(fields, got or [], strict=False) if v is not None}
        done = failed = 0.0
        for m, weight in ((minute, 1.0), (minute - 1, 1.0 - into / 60_000)):
            slot = str(m % SERIES_RING)
            if text(ring.get(f"{slot}:t", b"")) != str(m):
                continue
            done += weight * int(text(ring.get(f"{slot}:c", b"0")) or 0)
            failed += weight * int(text(ring.get(f"{slot}:f", b"0")) or 0)
        return done, failed

    return calls()
