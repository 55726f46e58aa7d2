"""Recurrences: a registration per name that mints one job for every occurrence.

``register``/``upsert`` (every N ms or cron in a zone), ``trigger``, ``backfill``, ``pause``,
``resume``, ``cancel``; ``due`` and ``advance`` for a loop of your own. Scores are HOST-clock
milliseconds. Either connector, like the verbs in ``jobs``.
"""

from __future__ import annotations

from echomq.verbs.repeat import (
    CATCHUP,
    CLOCKS,
    DEFAULT_ALL_WINDOW_MS,
    DEFAULT_CAP,
    DEFAULT_SKIP_WINDOW_MS,
    DEFINITION,
    MAX_BACKFILL,
    MAX_CAP,
    MAX_WINDOW_MS,
    OVERLAP,
    Fired,
    Plan,
    Registration,
    Slot,
    advance,
    backfill,
    cancel,
    count,
    definition,
    due,
    due_verb,
    fire,
    fire_step,
    get,
    head,
    next_runs,
    next_slot,
    now_ms,
    occurrences,
    pause,
    plan,
    preview,
    rearm,
    records,
    register,
    register_cron,
    resume,
    sweep,
    trigger,
    upsert,
)

__all__ = [
    "CATCHUP", "CLOCKS", "DEFAULT_ALL_WINDOW_MS", "DEFAULT_CAP", "DEFAULT_SKIP_WINDOW_MS",
    "DEFINITION", "MAX_BACKFILL", "MAX_CAP", "MAX_WINDOW_MS", "OVERLAP", "Fired", "Plan",
    "Registration", "Slot", "advance", "backfill", "cancel", "count", "definition", "due",
    "due_verb", "fire", "fire_step", "get", "head", "next_runs", "next_slot", "now_ms",
    "occurrences", "pause", "plan", "preview", "rearm", "records", "register", "register_cron",
    "resume", "sweep", "trigger", "upsert",
]
