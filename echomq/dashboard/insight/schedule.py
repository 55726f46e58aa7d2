"""The schedule clock: what a promote at a given SERVER ms would release, and the soonest
scheduled jobs by run-at."""

from __future__ import annotations

from dataclasses import dataclass

from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Verb, scored, text, verb
from echomq.dashboard.insight.common import PAGE_MAX, score_of, set_key, time_reply_ms


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
        head = [(text(m), score_of(s)) for m, s in scored(first)]
        return Release(at_ms, int(n), head, int(total), time_reply_ms(now))

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
        return Timeline([(text(m), score_of(s)) for m, s in scored(first)], int(total),
                        time_reply_ms(now))

    return calls()
