"""A page of a queue's groups with their stats, from an ``SSCAN`` cursor (bounded however
many groups the queue has)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, text, verb
from echomq.dashboard.insight.common import PAGE_MAX


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
    from echomq.verbs.groups import GroupStats

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
                             "paused", "rate_max", "rate_ms", "paused_until", "weight")),
                )))
            for i, g in enumerate(names):
                waiting, (active, limit, paused, rmax, rms, until, weight) = (
                    replies[2 * i], replies[2 * i + 1])
                out[g] = GroupStats(int(waiting), int(active or 0), num(limit),
                                    paused is not None, num(rmax), num(rms), num(until),
                                    num(weight) or 1)
        more = text(nxt)
        return GroupPage(out, None if more == "0" else more)

    return calls()
