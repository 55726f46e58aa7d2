"""The recurrence registry: a registration, not a loop. Every score is HOST-clock ms.

``register``, ``due`` and ``advance`` read the host's wall clock (``time.time()``), where
the schedule set and promote read the server's ``TIME``. A late tick does not pile up a
backlog: ``advance`` measures the next run from the host's now, not from the old score.

Beyond the base verbs (at least once per due period, by ``due`` then ``advance``):

- ``fire`` is one atomic transition (the ``fire`` script): it checks that the name's score
  is still the one the caller read, enqueues the occurrence under a HOST-minted id as a
  normal pending job, and moves the name to its next run. Two pumps that read the same due
  record enqueue it once; a pump that dies mid-fire leaves nothing or everything. So the
  Pump (``sweep``) gives exactly one occurrence per due period.
- ``register_cron`` and ``upsert`` add cron cadences in an IANA zone (``echomq.core.cron``),
  ``start_at``/``end_at``/``limit``, a missed-run policy (``catchup``) and an ``overlap``
  policy, all stored on the record. Re-registering the same definition is a no-op, a
  changed one is an explicit ``upsert`` ("updated").

Record fields (``emq:{q}:repeat:<name>``): the definition ``every_ms`` | ``cron`` + ``tz``,
``template``, ``start_at``, ``end_at``, ``limit``, ``catchup``, ``window_ms``, ``cap``,
``overlap``; runtime ``fired`` (occurrences enqueued), ``last_id``, ``last_at`` (the slot
the last occurrence stands for), ``done`` (``limit`` | ``ended``: no further run; the
member is parked at ``+inf`` on the repeat set, where no due read reaches it) and
``paused`` (``pause``: the score is kept but ``fire`` refuses the name until ``resume``;
with ``paused_until``, SERVER ms, the Pump's sweep resumes it then). The definition also
holds ``jitter_ms`` and ``exclude``; ``overlap`` is one of Temporal's policies (``allow``,
``skip``, ``buffer_one``, ``buffer_all``, ``cancel_other``: see ``upsert``).

By idea (``repeat.upsert`` etc. stay the way to call them): ``seed`` (the base verbs:
register, cancel, due, advance, count, pause/resume, head), ``entries`` (the entry a read
returns, ``records``, ``get``, ``next_runs``, ``preview``), ``definitions``
(``Definition``, ``put``, ``register_cron``, ``upsert``, ``definition``), ``firing``
(``fire``, ``sweep``) and ``steering`` (``trigger``, ``backfill``); the pure slot planner is
``echomq.core.recurrence``.
"""

from __future__ import annotations

from echomq.core.recurrence import (
    DEFAULT_ALL_WINDOW_MS,
    DEFAULT_CAP,
    DEFAULT_SKIP_WINDOW_MS,
    Plan,
    next_slot,
    plan,
)
from echomq.verbs.repeat.definitions import (
    CATCHUP,
    DEFINITION,
    MAX_CAP,
    MAX_WINDOW_MS,
    OVERLAP,
    Definition,
    definition,
    put,
    register_cron,
    upsert,
)
from echomq.verbs.repeat.entries import (
    Registration,
    Slot,
    get,
    next_runs,
    now_ms,
    occurrences,
    preview,
    records,
)
from echomq.verbs.repeat.firing import CLOCKS, Fired, fire, fire_step, sweep
from echomq.verbs.repeat.seed import (
    advance,
    cancel,
    count,
    due,
    due_verb,
    head,
    pause,
    rearm,
    register,
    resume,
)
from echomq.verbs.repeat.steering import MAX_BACKFILL, backfill, trigger

__all__ = [
    "CATCHUP", "CLOCKS", "DEFAULT_ALL_WINDOW_MS", "DEFAULT_CAP", "DEFAULT_SKIP_WINDOW_MS",
    "DEFINITION", "MAX_BACKFILL", "MAX_CAP", "MAX_WINDOW_MS", "OVERLAP", "Definition", "Fired",
    "Plan",
    "Registration", "Slot", "advance", "backfill", "cancel", "count", "definition", "due",
    "due_verb", "fire", "fire_step", "get", "head", "next_runs", "next_slot", "now_ms",
    "occurrences", "pause", "plan", "preview", "put", "rearm", "records", "register",
    "register_cron", "resume", "sweep", "trigger", "upsert",
]
