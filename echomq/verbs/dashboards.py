"""Where a running dashboard can be reached: ``echomq dashboard`` announces its base URL
in one sorted set, ``emq:dashboards`` (member: the URL, score: when the announcement
lapses, SERVER ms), renewed while it runs and withdrawn when it stops; ``echomq job ID``
reads it to print the job's page. A dashboard killed without its withdrawal drops out
when its announcement lapses. Clock: the SERVER clock (``TIME``).
"""

from __future__ import annotations

from typing import Any

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, single, text, verb

KEY = f"{keyspace.PREFIX}:dashboards"
#: how long an announcement lives unless renewed (``echomq dashboard`` renews it every
#: third of that)
TTL_MS = 60_000


def _now_ms(reply: Any) -> int:
    secs, micros = reply
    return int(secs) * 1000 + int(micros) // 1000


@verb
def announce(url: str, ttl_ms: int = TTL_MS) -> Verb[None]:
    """Say a dashboard answers at ``url`` for the next ``ttl_ms`` (and drop lapsed ones)."""

    def calls() -> Verb[None]:
        now = _now_ms((yield Command(("TIME",))))
        yield Batch((Command(("ZADD", KEY, now + ttl_ms, url)),
                     Command(("ZREMRANGEBYSCORE", KEY, "-inf", now))))
        return None

    return calls()


@verb
def withdraw(url: str) -> Verb[int]:
    """Take ``url``'s announcement back (a dashboard that stops)."""
    return single(Command(("ZREM", KEY, url)), int)


@verb
def live() -> Verb[list[str]]:
    """The base URLs of the dashboards announced and not lapsed, latest renewed first."""

    def calls() -> Verb[list[str]]:
        now = _now_ms((yield Command(("TIME",))))
        urls = yield Command(("ZRANGEBYSCORE", KEY, f"({now}", "+inf"))
        return [text(u) for u in reversed(urls)]

    return calls()
