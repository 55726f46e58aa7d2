"""What every insight read shares: the states a surface lists and their sets, the page
bound, and reply decoders (``TIME`` as SERVER ms)."""

from __future__ import annotations

from typing import Any

from echomq.core import keyspace, readings, states
from echomq.core.steps import pairs, text
from echomq.verbs import metrics

#: the job states a surface lists, each with the sorted set that holds it
STATES = ("pending", "scheduled", "active", "completed", "dead", "cancelled", "expired",
          "waiting-children", "waiting")
SET_OF = states.SET_OF
#: states listed newest first (scored by the SERVER ms they ended)
NEWEST_FIRST = frozenset({"completed", "dead", "cancelled", "expired"})
#: the per-minute series ``metrics.observe`` keeps: a ring of a day's minute slots, of which
#: a queue's view shows the last hour
SERIES_RING = metrics.SERIES_RING
SERIES_SLOTS = 60
PAGE_MAX = 200


def set_key(queue: str, state: str) -> str:
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    return keyspace.queue_key(queue, SET_OF.get(state, state))


def time_reply_ms(reply: Any) -> int:
    secs, micros = reply
    return int(secs) * 1000 + int(micros) // 1000


def whole_or(value: Any, default: int = 0) -> int:
    """A stored count as an int; ``default`` when absent or no finite number (a hostile
    value is shown as the default, never raised: ``core.readings``)."""
    got = readings.whole(value)
    return default if got is None else got


def score_of(value: Any) -> int:
    """A sorted-set score as ms, clamped to the instants a ``datetime`` holds."""
    return readings.score_ms(value)


def as_fields(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return pairs(reply or [])
