"""Job transitions: each verb is keys + argv + reply decoding, run by either connector.

Every function here takes a ``Connector`` (and returns the result) or an
``AsyncConnector`` (and returns an awaitable of the same result). Argument guards raise
``TypeError``/``ValueError`` before any I/O; server refusals raise ``errors.KindError``,
``StaleError``, ``GoneError`` or ``StateError`` with the server's text.

Clocks: ``enqueue_in``, ``delay(mode="in")``, ``promote``, ``claim``, ``retry``, ``reap``
and ``extend`` read the SERVER clock (``TIME`` inside the script or module command).
``enqueue_at`` and ``delay(mode="at")`` take an absolute run-at the caller priced on its
own clock. Nothing here reads the host clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from . import _guards as guard
from . import errors, keyspace
from .outcomes import Outcome
from .steps import Batch, Command, Eval, Maybe, Native, drive, single, text

DEFAULT_MAX_STALLED = 2


class Claim(NamedTuple):
    """A job in hand: its id, the fencing token (= its attempts after this claim) and payload."""

    id: str
    token: int
    payload: bytes


def _admission(admitted: Outcome) -> Any:
    def decode(reply: Any) -> Outcome:
        return admitted if int(reply) == 1 else Outcome.DUPLICATE

    return decode


def _enqueue_step(queue: str, job_id: str, payload: bytes | str) -> Eval:
    guard.string("job_id", job_id)
    guard.payload(payload)
    return Eval(
        "enqueue",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "pending")),
        (job_id, payload),
    )


def _schedule_step(
    queue: str, job_id: str, payload: bytes | str, mode: str, value: int, via: Any = None
) -> Eval:
    guard.string("job_id", job_id)
    guard.payload(payload)
    return Eval(
        "schedule",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "schedule")),
        (job_id, payload, mode, str(value)),
        native="EMQ.SCHEDULE",
        via=via,
    )


def enqueue(conn: Any, queue: str, job_id: str, payload: bytes | str) -> Maybe[Outcome]:
    """Admit a job claimable now: ``"enqueued"``, or ``"duplicate"`` if the id has a row."""
    step = _enqueue_step(queue, job_id, payload)
    return drive(conn, single(step, _admission(Outcome.ENQUEUED)))


def enqueue_at(
    conn: Any, queue: str, job_id: str, payload: bytes | str, run_at_ms: int, via: Any = None
) -> Maybe[Outcome]:
    """Admit a job fenced out of pending until ``run_at_ms`` (absolute ms, CALLER's clock).

    Guards only that ``run_at_ms`` is an int (as the seed): a past or negative run-at is
    due at the next promote. ``"scheduled"`` or ``"duplicate"``.
    """
    guard.integer("run_at_ms", run_at_ms)
    step = _schedule_step(queue, job_id, payload, "at", run_at_ms, via)
    return drive(conn, single(step, _admission(Outcome.SCHEDULED)))


def enqueue_in(
    conn: Any, queue: str, job_id: str, payload: bytes | str, delay_ms: int, via: Any = None
) -> Maybe[Outcome]:
    """Admit a job due ``delay_ms`` from now on the SERVER clock (``TIME`` in the script).

    ``delay_ms`` must be a non-negative int. ``"scheduled"`` or ``"duplicate"``.
    """
    guard.non_negative("delay_ms", delay_ms)
    step = _schedule_step(queue, job_id, payload, "in", delay_ms, via)
    return drive(conn, single(step, _admission(Outcome.SCHEDULED)))


def _batch_admissions(steps: list[Eval], admitted: Outcome) -> Any:
    replies = yield Batch(tuple(steps))
    out: list[Outcome] = []
    for reply in replies:
        if isinstance(reply, errors.ServerError):
            raise reply
        out.append(admitted if int(reply) == 1 else Outcome.DUPLICATE)
    return out


def enqueue_many(
    conn: Any, queue: str, items: Iterable[tuple[str, bytes | str]]
) -> Maybe[list[Outcome]]:
    """``enqueue`` for many ``(job_id, payload)`` pairs in one round trip (pipelined).

    Each job is its own atomic transition; the list of outcomes is in input order. Every
    argument is checked before anything is sent.
    """
    steps = [_enqueue_step(queue, job_id, payload) for job_id, payload in items]
    return drive(conn, _batch_admissions(steps, Outcome.ENQUEUED))


def schedule_many(
    conn: Any, queue: str, items: Iterable[tuple[str, bytes | str, str, int]]
) -> Maybe[list[Outcome]]:
    """Schedule many ``(job_id, payload, mode, value)`` in one round trip.

    ``mode`` is ``"at"`` (absolute ms, caller's clock) or ``"in"`` (a non-negative delay
    priced on the SERVER clock), as ``enqueue_at`` / ``enqueue_in``.
    """
    steps = []
    for job_id, payload, mode, value in items:
        guard.mode(mode)
        (guard.non_negative if mode == "in" else guard.integer)("value", value)
        steps.append(_schedule_step(queue, job_id, payload, mode, value))
    return drive(conn, _batch_admissions(steps, Outcome.SCHEDULED))


def promote(conn: Any, queue: str, batch: int) -> Maybe[int]:
    """Release up to ``batch`` scheduled jobs due at SERVER now; the count released.

    Flat jobs rejoin pending (mint order), grouped rows their lane. Idempotent.
    """
    guard.positive("batch", batch)
    step = Eval(
        "promote",
        (keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "pending")),
        (keyspace.base(queue), str(batch)),
        native="EMQ.PROMOTE",
    )
    return drive(conn, single(step, int))


def _claims(reply: Sequence[Any]) -> list[Claim]:
    return [
        Claim(text(reply[i]), int(reply[i + 1]), reply[i + 2]) for i in range(0, len(reply), 3)
    ]


def _claim_step(queue: str, lease_ms: int, count: int) -> Eval:
    guard.positive("lease_ms", lease_ms)
    guard.positive("count", count)
    return Eval(
        "claim",
        (keyspace.queue_key(queue, "pending"), keyspace.queue_key(queue, "active")),
        (keyspace.base(queue), str(lease_ms), str(count)),
    )


def claim(conn: Any, queue: str, lease_ms: int) -> Maybe[Claim | None]:
    """Lease the next pending job (mint order) until SERVER now + ``lease_ms``.

    Increments ``attempts`` and returns it as the token, or ``None`` when pending is empty.
    """

    def first(reply: Any) -> Claim | None:
        got = _claims(reply)
        return got[0] if got else None

    return drive(conn, single(_claim_step(queue, lease_ms, 1), first))


def claim_many(conn: Any, queue: str, lease_ms: int, count: int) -> Maybe[list[Claim]]:
    """Lease up to ``count`` pending jobs in mint order in one atomic call."""
    return drive(conn, single(_claim_step(queue, lease_ms, count), _claims))


def _held(queue: str, job_id: str, token: int) -> tuple[str, str]:
    guard.string("job_id", job_id)
    guard.integer("token", token)
    return keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "active")


def _ack_step(queue: str, job_id: str, token: int, keep: bool) -> Eval:
    row, active = _held(queue, job_id, token)
    return Eval(
        "ack",
        (row, active, keyspace.queue_key(queue, "completed")),
        (job_id, str(token), "1" if keep else "0"),
    )


def ack(conn: Any, queue: str, job_id: str, token: int, keep: bool = True) -> Maybe[None]:
    """Complete a job in hand, fenced on ``token``.

    ``keep=True`` writes ``state=completed`` (and ``completed_at``, SERVER ms) and indexes
    it for retention; ``keep=False`` deletes the row.
    """
    return drive(conn, single(_ack_step(queue, job_id, token, keep), lambda _: None))


def ack_many(
    conn: Any, queue: str, held: Iterable[tuple[str, int]], keep: bool = True
) -> Maybe[list[errors.ServerError | None]]:
    """``ack`` many ``(job_id, token)`` in one round trip; a refusal is returned in its slot."""
    steps = tuple(_ack_step(queue, job_id, token, keep) for job_id, token in held)

    def verb() -> Any:
        replies = yield Batch(steps)
        return [r if isinstance(r, errors.ServerError) else None for r in replies]

    return drive(conn, verb())


def retry(
    conn: Any,
    queue: str,
    job_id: str,
    token: int,
    delay_ms: int,
    max_attempts: int,
    error: str,
) -> Maybe[Outcome]:
    """Fail a job in hand, fenced on ``token``: ``"retrying"`` or ``"dead"``.

    Parks it at SERVER now + ``delay_ms`` as scheduled, or dead-letters it once its attempts
    reach ``max_attempts``. The error text is kept on the row either way.
    """
    row, active = _held(queue, job_id, token)
    guard.non_negative("delay_ms", delay_ms)
    guard.positive("max_attempts", max_attempts)
    guard.string("error", error)
    step = Eval(
        "retry",
        (row, active, keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "dead")),
        (job_id, str(token), str(delay_ms), str(max_attempts), error),
    )
    return drive(conn, single(step, lambda r: Outcome.RETRYING if int(r) == 1 else Outcome.DEAD))


def delay(
    conn: Any, queue: str, job_id: str, token: int, delay_ms: int, mode: str = "in"
) -> Maybe[None]:
    """Send a job in hand back to the schedule without touching its attempts.

    ``mode="in"``: due at SERVER now + ``delay_ms``; ``mode="at"``: ``delay_ms`` is an
    absolute run-at. Never dead-letters. Guards only that the value is an int (the seed).
    """
    row, active = _held(queue, job_id, token)
    guard.integer("delay_ms", delay_ms)
    guard.mode(mode)
    step = Eval(
        "delay",
        (row, active, keyspace.queue_key(queue, "schedule")),
        (job_id, str(token), mode, str(delay_ms)),
        native="EMQ.DELAY",
    )
    return drive(conn, single(step, lambda _: None))


def reschedule(conn: Any, queue: str, job_id: str, mode: str, due: int) -> Maybe[int]:
    """Rescore a job already on the schedule set (native only, wire 6): 1, or -1 for no row.

    Writes only ``ZADD ... XX``; a job that is not scheduled raises ``StateError``.
    """
    guard.string("job_id", job_id)
    guard.mode(mode)
    guard.integer("due", due)
    step = Native(
        "EMQ.RESCHEDULE",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "schedule")),
        (job_id, mode, str(due)),
    )
    return drive(conn, single(step, int))


def reap(conn: Any, queue: str, batch: int, max_stalled: int = DEFAULT_MAX_STALLED) -> Maybe[int]:
    """Return up to ``batch`` leases expired at SERVER now to pending; the count handled.

    Each counts a stall; a job that stalls more than ``max_stalled`` times is dead-lettered.
    """
    guard.positive("batch", batch)
    guard.non_negative("max_stalled", max_stalled)
    step = Eval(
        "reap",
        (
            keyspace.queue_key(queue, "active"),
            keyspace.queue_key(queue, "pending"),
            keyspace.queue_key(queue, "dead"),
        ),
        (keyspace.base(queue), str(batch), str(max_stalled)),
    )
    return drive(conn, single(step, int))


def extend(conn: Any, queue: str, job_id: str, token: int, lease_ms: int) -> Maybe[int]:
    """Checkpoint a lease: expiry becomes SERVER now + ``lease_ms``; returns that ms."""
    row, active = _held(queue, job_id, token)
    guard.positive("lease_ms", lease_ms)
    step = Eval("extend", (row, active), (job_id, str(token), str(lease_ms)))
    return drive(conn, single(step, int))


# -- reads (plain commands; no transition) ------------------------------------------------

STATE_SETS = ("pending", "scheduled", "active", "dead", "completed")
_SET_OF = {"scheduled": "schedule"}


def get(conn: Any, queue: str, job_id: str) -> Maybe[dict[str, Any] | None]:
    """The job's row as a dict (``payload`` as bytes, other fields as str), or ``None``."""
    key = keyspace.job_key(queue, job_id)

    def decode(reply: Any) -> dict[str, Any] | None:
        if not reply:
            return None
        row = {text(k): v for k, v in reply.items()}
        return {k: (v if k == "payload" else text(v)) for k, v in row.items()}

    return drive(conn, single(Command(("HGETALL", key)), decode))


def counts(conn: Any, queue: str) -> Maybe[dict[str, int]]:
    """How many jobs sit in each state set of ``queue`` (one round trip)."""
    keys = [keyspace.queue_key(queue, _SET_OF.get(s, s)) for s in STATE_SETS]

    def verb() -> Any:
        replies = yield Batch(tuple(Command(("ZCARD", k)) for k in keys))
        return {s: int(n) for s, n in zip(STATE_SETS, replies, strict=True)}

    return drive(conn, verb())


def server_now_ms(conn: Any) -> Maybe[int]:
    """The SERVER clock in ms (``TIME``), the clock the schedule and leases are priced on."""

    def decode(reply: Any) -> int:
        secs, micros = reply
        return int(secs) * 1000 + int(micros) // 1000

    return drive(conn, single(Command(("TIME",)), decode))
