"""Debounce with a cap: many calls with one key become one job run on the last payload.

``debounce`` is one script (``debounce``): the first call with a key admits a job on the
schedule at SERVER now + ``debounce_ms``; each later call while that job waits (never
started) replaces its payload and moves its run-at to SERVER now + ``debounce_ms``, never
past the first call + ``debounce_max_ms``, so a steady stream still runs at least that
often. Every call answers the one job's id. A job that started (running or retrying) is not
touched: the next call opens a new window. The key lives on ``emq:{q}:debounce:<key>`` and
is released when its job ends.
"""

from __future__ import annotations

from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.options import check_unique
from echomq.core.outcomes import Outcome
from echomq.core.steps import Eval, Verb, single, text, verb
from echomq.verbs.jobs.admission import Admitted, Options

_OUTCOMES = {1: Outcome.SCHEDULED, 0: Outcome.DEBOUNCED, 2: Outcome.DUPLICATE}


@verb
def debounce(
    queue: str,
    job_id: str,
    payload: bytes | str,
    key: str,
    debounce_ms: int,
    debounce_max_ms: int | None = None,
    *,
    priority: int = 0,
    group: str | None = None,
    notify_ms: int | None = None,
    expires_ms: int | None = None,
    expires_at_ms: int | None = None,
) -> Verb[Admitted]:
    """One debounced call: ``Admitted(outcome, id)``, the id of the one job the key holds.

    ``"scheduled"``: a new window, ``job_id`` admitted at SERVER now + ``debounce_ms``;
    ``"debounced"``: folded into the waiting job (payload replaced, run-at moved, never
    past its first call + ``debounce_max_ms``); ``"duplicate"``: ``job_id`` already has a
    row (nothing written). The options (priority, group, kept-result notify, deadline)
    are those of the call that opened the window. SERVER clock.
    """
    guard.string("job_id", job_id)
    guard.payload(payload)
    check_unique(key)
    guard.span("debounce_ms", debounce_ms, minimum=1)
    if debounce_max_ms is not None:
        guard.span("debounce_max_ms", debounce_max_ms, minimum=1)
        if debounce_max_ms < debounce_ms:
            raise ValueError(f"debounce_max_ms ({debounce_max_ms}) must be at least "
                             f"debounce_ms ({debounce_ms})")
    opts = Options.of(priority, group, None, None, notify_ms, expires_ms, expires_at_ms)
    tail = (*opts.argv(), opts.expires or "")
    step = Eval(
        "debounce",
        (keyspace.queue_key(queue, f"debounce:{key}"), keyspace.queue_key(queue, "schedule")),
        (keyspace.base(queue), job_id, payload, str(debounce_ms),
         "" if debounce_max_ms is None else str(debounce_max_ms), *tail),
    )

    def decode(reply: Any) -> Admitted:
        return Admitted(_OUTCOMES[int(reply[1])], text(reply[0]))

    return single(step, decode)
