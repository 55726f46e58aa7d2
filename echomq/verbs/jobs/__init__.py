"""Job transitions: each verb is keys + argv + reply decoding, run by either connector.

Every verb here takes a ``Connector`` first (and returns the result) or an
``AsyncConnector`` (and returns an awaitable of the same result): ``steps.verb`` makes the
builder (which describes the calls) into that function. Argument guards raise
``TypeError``/``ValueError`` before any I/O; server refusals raise ``errors.KindError``,
``StaleError``, ``GoneError`` or ``StateError`` with the server's text.

Clocks: ``enqueue_in``, ``delay(mode="in")``, ``promote``, ``claim``, ``retry``, ``reap``
and ``extend`` read the SERVER clock (``TIME`` inside the script or module command).
``enqueue_at`` and ``delay(mode="at")`` take an absolute run-at the caller priced on its
own clock. Nothing here reads the host clock.

The verbs live by family (``jobs.enqueue`` etc. stay the way to call them):
``admission`` (enqueue, enqueue_at/in, admit, Options), ``bulk`` (the many-job forms),
``claims`` (promote, claim, leases: reap, extend, checkpoint, progress), ``deadlines``
(expire: the deadline sweep), ``debouncing`` (debounce), ``holds`` (why: what holds a
waiting job), ``settlement``
(ack, retry, delay, rate_limited), ``control`` (cancel, pause/resume, the rate cap) and
``reads`` (get, counts, stats, page, next_due_ms, result, wait_done, fate, server time).
"""

from __future__ import annotations

from echomq.core import errors, keyspace
from echomq.verbs.jobs.admission import (
    PLAIN,
    Admitted,
    Options,
    admit,
    admit_now,
    enqueue,
    enqueue_at,
    enqueue_in,
)
from echomq.verbs.jobs.bulk import (
    CHUNK,
    admit_many,
    enqueue_many,
    schedule_many,
)
from echomq.verbs.jobs.claims import (
    DEFAULT_MAX_STALLED,
    Checkpoint,
    Claim,
    checkpoint,
    claim,
    claim_many,
    extend,
    progress,
    promote,
    reap,
)
from echomq.verbs.jobs.control import (
    cancel,
    cancel_many,
    clear_rate,
    declare_limit,
    declare_rate,
    finish_cancelled,
    is_paused,
    pause,
    paused_until,
    queue_limit,
    rate_args,
    resume,
    set_limit,
    set_rate,
)
from echomq.verbs.jobs.deadlines import expire
from echomq.verbs.jobs.debouncing import debounce
from echomq.verbs.jobs.holds import Hold, why
from echomq.verbs.jobs.reads import (
    SPARSE_SETS,
    STAT_NAMES,
    STATE_SETS,
    Due,
    counts,
    fate,
    get,
    next_due,
    next_due_ms,
    page,
    result,
    server_now_ms,
    stats,
    wait_done,
)
from echomq.verbs.jobs.settlement import (
    AckEntry,
    ack,
    ack_and_claim,
    ack_and_claim_queues,
    ack_many,
    count_delay,
    delay,
    delays,
    rate_limited,
    reschedule,
    retry,
    tally,
)

__all__ = [
    "CHUNK",
    "DEFAULT_MAX_STALLED",
    "PLAIN",
    "SPARSE_SETS",
    "STATE_SETS",
    "STAT_NAMES",
    "AckEntry",
    "Admitted",
    "Checkpoint",
    "Claim",
    "Due",
    "Hold",
    "Options",
    "ack",
    "ack_and_claim",
    "ack_and_claim_queues",
    "ack_many",
    "admit",
    "admit_many",
    "admit_now",
    "cancel",
    "cancel_many",
    "checkpoint",
    "claim",
    "claim_many",
    "clear_rate",
    "count_delay",
    "counts",
    "debounce",
    "declare_limit",
    "declare_rate",
    "delay",
    "delays",
    "enqueue",
    "enqueue_at",
    "enqueue_in",
    "enqueue_many",
    "errors",
    "expire",
    "extend",
    "fate",
    "finish_cancelled",
    "get",
    "is_paused",
    "keyspace",
    "next_due",
    "next_due_ms",
    "page",
    "pause",
    "paused_until",
    "progress",
    "promote",
    "queue_limit",
    "rate_args",
    "rate_limited",
    "reap",
    "reschedule",
    "result",
    "resume",
    "retry",
    "schedule_many",
    "server_now_ms",
    "set_limit",
    "set_rate",
    "stats",
    "tally",
    "wait_done",
    "why",
]
