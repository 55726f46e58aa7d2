"""Job transitions: each verb is keys + argv + reply decoding, run by either connector.

Every verb here takes a ``Connector`` first (and returns the result) or an
``AsyncConnector`` (and returns an awaitable of the same result): ``steps.verb`` makes the
builder below, which describes the calls, into that function. Argument guards raise
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
from .steps import Batch, Command, Eval, Native, Verb, scored, single, text, verb

DEFAULT_MAX_STALLED = 2


class Claim(NamedTuple):
    """A job in hand: its id, the fencing token (= its attempts after this claim) and payload."""

    id: str
    token: int
    payload: bytes


def _is_admitted(reply: Any) -> bool:
    # 1 admitted; 0 (the id has a row) or the unique key's owner id (bytes): a duplicate
    return not isinstance(reply, (bytes, str)) and int(reply) == 1


def _admission(admitted: Outcome) -> Any:
    def decode(reply: Any) -> Outcome:
        return admitted if _is_admitted(reply) else Outcome.DUPLICATE

    return decode


class Admitted(NamedTuple):
    """What an admission did: its outcome, and the id that holds the slot: the job's own id
    when admitted (or when its id already had a row), the OWNER's id when a live unique key
    refused it."""

    outcome: Outcome
    id: str


MAX_UNIQUE_BYTES = 1000


class Options(NamedTuple):
    """Admission options, checked before any I/O (the defaults are a plain job)."""

    priority: int = 0
    group: str | None = None
    unique: str | None = None
    unique_for_ms: int | None = None
    notify_ms: int | None = None

    @classmethod
    def of(
        cls,
        priority: int = 0,
        group: str | None = None,
        unique: str | None = None,
        unique_for_ms: int | None = None,
        notify_ms: int | None = None,
    ) -> Options:
        if (type(priority) is int and priority == 0 and group is None and unique is None
                and unique_for_ms is None and notify_ms is None):
            return PLAIN  # the common call: nothing to check
        guard.priority(priority)
        if group is not None:
            keyspace.validate_group(group)
        if unique is not None:
            guard.string("unique", unique)
            if not unique or len(unique.encode()) > MAX_UNIQUE_BYTES:
                raise ValueError(f"unique must be 1..{MAX_UNIQUE_BYTES} bytes, got {unique!r:.40}")
        if unique_for_ms is not None:
            if unique is None:
                raise ValueError("unique_for_ms needs a unique key")
            guard.span("unique_for_ms", unique_for_ms, minimum=1)
        if notify_ms is not None:
            guard.span("notify_ms", notify_ms, minimum=1)
        return cls(priority, group, unique, unique_for_ms, notify_ms)

    @classmethod
    def from_item(cls, extra: Sequence[Any]) -> Options:
        """The options dict a bulk item may carry as its last element (or none)."""
        if not extra:
            return PLAIN
        if len(extra) > 1 or not isinstance(extra[0], dict):
            raise TypeError("a bulk item's extra element must be one options dict")
        unknown = set(extra[0]) - set(cls._fields)
        if unknown:
            raise TypeError(f"unknown admission options: {', '.join(sorted(unknown))}")
        return cls.of(**extra[0])

    @property
    def plain(self) -> bool:
        return self == PLAIN

    def argv(self) -> tuple[str, ...]:
        """The scripts' option tail: priority, group, unique, unique_for ms, notify ms
        ('' for a default)."""
        def opt(v: object) -> str:
            return "" if v is None or v == 0 else str(v)

        return (opt(self.priority), self.group or "", self.unique or "",
                opt(self.unique_for_ms), opt(self.notify_ms))


PLAIN = Options()


def _enqueue_step(queue: str, job_id: str, payload: bytes | str, opts: Options = PLAIN) -> Eval:
    guard.string("job_id", job_id)
    guard.payload(payload)
    return Eval(
        "enqueue",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "pending")),
        (job_id, payload) if opts.plain else (job_id, payload, *opts.argv()),
    )


def _schedule_step(
    queue: str,
    job_id: str,
    payload: bytes | str,
    mode: str,
    value: int,
    via: Any = None,
    opts: Options = PLAIN,
) -> Eval:
    guard.string("job_id", job_id)
    guard.payload(payload)
    args: tuple[str | bytes, ...] = (job_id, payload, mode, str(value))
    # EMQ.SCHEDULE takes the seed's four arguments; options ride the script at wire 6 too
    return Eval(
        "schedule",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "schedule")),
        args if opts.plain else (*args, *opts.argv()),
        native="EMQ.SCHEDULE" if opts.plain else None,
        via=via,
    )


@verb
def admit(
    queue: str,
    job_id: str,
    payload: bytes | str,
    *,
    mode: str = "now",
    value: int = 0,
    priority: int = 0,
    group: str | None = None,
    unique: str | None = None,
    unique_for_ms: int | None = None,
    notify_ms: int | None = None,
) -> Verb[Admitted]:
    """The general admission, every option at once: ``Admitted(outcome, id)``.

    ``mode``: ``"now"`` (claimable now), ``"in"`` (``value`` ms from SERVER now) or ``"at"``
    (``value`` an absolute ms, CALLER's clock). ``unique``: while a job admitted with that
    key is waiting or running (and until SERVER admission + ``unique_for_ms``, if given)
    another admission with the key writes nothing and answers ``DUPLICATE`` with the
    owner's id; the key is released in the script that ends the owner (ack, death, cancel).
    ``notify_ms``: the job's end leaves a done token (``wait_done``) kept that long.
    """
    if mode not in ("now", "in", "at"):
        raise ValueError(f"mode must be 'now', 'in' or 'at', not {mode!r}")
    if mode == "in":
        guard.span("value", value)
    elif mode == "at":
        guard.instant("value", value)
    opts = Options.of(priority, group, unique, unique_for_ms, notify_ms)
    if mode == "now":
        step = _enqueue_step(queue, job_id, payload, opts)
        admitted = Outcome.ENQUEUED
    else:
        step = _schedule_step(queue, job_id, payload, mode, value, None, opts)
        admitted = Outcome.SCHEDULED

    def decode(reply: Any) -> Admitted:
        if isinstance(reply, (bytes, str)):
            return Admitted(Outcome.DUPLICATE, text(reply))
        return Admitted(admitted if int(reply) == 1 else Outcome.DUPLICATE, job_id)

    return single(step, decode)


@verb
def enqueue(
    queue: str,
    job_id: str,
    payload: bytes | str,
    *,
    priority: int = 0,
    group: str | None = None,
) -> Verb[Outcome]:
    """Admit a job claimable now: ``"enqueued"``, or ``"duplicate"`` if the id has a row.

    ``priority`` (0..1_000_000, lower first; equal priorities in mint order) scores it on
    pending and is kept on the row; ``group`` makes it wait on its group's lane instead.
    """
    step = _enqueue_step(queue, job_id, payload, Options.of(priority, group))
    return single(step, _admission(Outcome.ENQUEUED))


@verb
def enqueue_at(
    queue: str,
    job_id: str,
    payload: bytes | str,
    run_at_ms: int,
    via: Any = None,
    *,
    priority: int = 0,
    group: str | None = None,
) -> Verb[Outcome]:
    """Admit a job fenced out of pending until ``run_at_ms`` (absolute ms, CALLER's clock).

    Guards that ``run_at_ms`` is an int (as the seed) within year 9999 (``ValueError``
    beyond ``guard.MAX_TIME_MS``): a past or negative run-at is due at the next promote.
    ``"scheduled"`` or ``"duplicate"``. ``priority`` and ``group`` ride on the row and take
    effect when promote releases it.
    """
    guard.instant("run_at_ms", run_at_ms)
    opts = Options.of(priority, group)
    step = _schedule_step(queue, job_id, payload, "at", run_at_ms, via, opts)
    return single(step, _admission(Outcome.SCHEDULED))


@verb
def enqueue_in(
    queue: str,
    job_id: str,
    payload: bytes | str,
    delay_ms: int,
    via: Any = None,
    *,
    priority: int = 0,
    group: str | None = None,
) -> Verb[Outcome]:
    """Admit a job due ``delay_ms`` from now on the SERVER clock (``TIME`` in the script).

    ``delay_ms`` must be a non-negative int that keeps now + it within year 9999 (priced
    on the HOST clock before any I/O). ``"scheduled"`` or ``"duplicate"``.
    """
    guard.span("delay_ms", delay_ms)
    opts = Options.of(priority, group)
    step = _schedule_step(queue, job_id, payload, "in", delay_ms, via, opts)
    return single(step, _admission(Outcome.SCHEDULED))


# jobs per bulk script call: long enough to amortize a call, short enough not to stall the server
CHUNK = 500


def _chunks(flat: list[Any], per_job: int) -> list[list[Any]]:
    step = CHUNK * per_job
    return [flat[i:i + step] for i in range(0, len(flat), step)]


def _bulk_admissions(
    script: str, keys: tuple[str, ...], queue: str, flat: list[Any], per_job: int,
    admitted: Outcome | None, owners: list[str | None] | None = None,
) -> Verb[list[Outcome]]:
    """One bulk script call per chunk, all chunks pipelined in one round trip.

    ``admitted`` is the outcome of an admission, or ``None`` when it depends on the
    job's mode (``admit_many``: every 9th value from the 3rd on). ``owners``, when given,
    receives per job the unique key's owner id that refused it (else ``None``).
    """
    base = keyspace.base(queue)
    steps = tuple(Eval(script, keys, (base, *chunk)) for chunk in _chunks(flat, per_job))
    if not steps:
        return []
    replies = yield Batch(steps)
    modes = flat[2::per_job]
    out: list[Outcome] = []
    for reply in replies:
        if isinstance(reply, errors.ServerError):
            raise reply
        for r in reply:
            ok = admitted
            if ok is None:
                ok = Outcome.ENQUEUED if modes[len(out)] == "now" else Outcome.SCHEDULED
            if owners is not None:
                owners.append(text(r) if isinstance(r, (bytes, str)) else None)
            out.append(ok if _is_admitted(r) else Outcome.DUPLICATE)
    return out


def _bulk_id(job_id: object) -> str:
    # the bulk scripts refuse a whole chunk for one foreign id; checking here first keeps
    # "a refusal writes nothing" true across chunks too
    guard.string("job_id", job_id)
    assert isinstance(job_id, str)
    if not job_id.startswith("JOB"):
        raise errors.KindError("EMQKIND job id must be JOB-namespaced")
    return job_id


def _admit_many(
    queue: str, rows: list[tuple[Any, ...]], owners: list[str | None] | None = None
) -> Verb[list[Outcome]]:
    """Rows of (id, payload, mode, value, Options) through the @admit_many script."""
    flat: list[Any] = []
    for job_id, payload, mode, value, opts in rows:
        flat += (job_id, payload, mode, str(value), *opts.argv())
    keys = (keyspace.queue_key(queue, "pending"), keyspace.queue_key(queue, "schedule"))
    return _bulk_admissions("admit_many", keys, queue, flat, 9, None, owners)


@verb
def admit_many(queue: str, items: Iterable[tuple[Any, ...]]) -> Verb[list[Admitted]]:
    """``admit`` for many ``(job_id, payload, mode, value[, options dict])`` items, in one
    round trip (one script call per 500): ``Admitted(outcome, id)`` in input order, the id
    being the unique key's owner when one refused the job. ``mode`` is ``"now"`` (value
    ignored), ``"in"`` (SERVER clock) or ``"at"`` (caller's clock)."""
    rows: list[tuple[Any, ...]] = []
    for job_id, payload, mode, value, *extra in items:
        if mode not in ("now", "in", "at"):
            raise ValueError(f"mode must be 'now', 'in' or 'at', not {mode!r}")
        if mode == "in":
            guard.span("value", value)
        elif mode == "at":
            guard.instant("value", value)
        rows.append((_bulk_id(job_id), guard.payload(payload), mode, value,
                     Options.from_item(extra)))

    def calls() -> Verb[list[Admitted]]:
        owners: list[str | None] = []
        outs = yield from _admit_many(queue, rows, owners)
        return [Admitted(o, owner or row[0]) for o, owner, row in zip(outs, owners, rows,
                                                                       strict=True)]

    return calls()


@verb
def enqueue_many(
    queue: str, items: Iterable[tuple[Any, ...]]
) -> Verb[list[Outcome]]:
    """``enqueue`` for many ``(job_id, payload)`` pairs: outcomes in input order.

    An item may carry an options dict as a third element (``{"priority": 5, "group":
    "acme", "unique": "k", "unique_for_ms": 60_000, "notify_ms": 3_600_000}``). One bulk
    script call per 500 jobs, pipelined in one round trip; each job is
    the ``enqueue`` transition. Every argument is checked before anything is sent.
    """
    rows: list[tuple[Any, ...]] = []
    for job_id, payload, *extra in items:
        rows.append((_bulk_id(job_id), guard.payload(payload), "now", 0,
                     Options.from_item(extra)))
    if any(not r[4].plain for r in rows):
        return _admit_many(queue, rows)
    flat: list[Any] = []
    for job_id, payload, *_ in rows:
        flat += (job_id, payload)
    return _bulk_admissions(
        "enqueue_many", (keyspace.queue_key(queue, "pending"),), queue, flat, 2,
        Outcome.ENQUEUED,
    )


@verb
def schedule_many(
    queue: str, items: Iterable[tuple[Any, ...]]
) -> Verb[list[Outcome]]:
    """Schedule many ``(job_id, payload, mode, value)``: outcomes in input order.

    ``mode`` is ``"at"`` (absolute ms, caller's clock) or ``"in"`` (a non-negative delay
    priced on the SERVER clock), as ``enqueue_at`` / ``enqueue_in``. An item may carry an
    options dict as a fifth element.
    """
    rows: list[tuple[Any, ...]] = []
    for job_id, payload, mode, value, *extra in items:
        guard.mode(mode)
        guard.span("value", value) if mode == "in" else guard.instant("value", value)
        rows.append((_bulk_id(job_id), guard.payload(payload), mode, value,
                     Options.from_item(extra)))
    if any(not r[4].plain for r in rows):
        return _admit_many(queue, rows)
    flat: list[Any] = []
    for job_id, payload, mode, value, _ in rows:
        flat += (job_id, payload, mode, str(value))
    return _bulk_admissions(
        "schedule_many", (keyspace.queue_key(queue, "schedule"),), queue, flat, 4,
        Outcome.SCHEDULED,
    )


@verb
def promote(queue: str, batch: int, native: bool = True) -> Verb[int]:
    """Release up to ``batch`` scheduled jobs due at SERVER now; the count released.

    Flat jobs rejoin pending (mint order), grouped rows their lane. Idempotent. At wire 6
    this sends ``EMQ.PROMOTE``, which refuses a due grouped row (``EMQSTATE promote lane
    not native``); ``native=False`` sends the script, which routes it to its lane.
    """
    guard.positive("batch", batch)
    step = Eval(
        "promote",
        (keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "pending")),
        (keyspace.base(queue), str(batch)),
        native="EMQ.PROMOTE" if native else None,
    )
    return single(step, int)


def _claims(reply: Sequence[Any]) -> list[Claim]:
    return [
        Claim(text(reply[i]), int(reply[i + 1]), reply[i + 2]) for i in range(0, len(reply), 3)
    ]


def _claim_step(queue: str, lease_ms: int, count: int) -> Eval:
    guard.span("lease_ms", lease_ms, minimum=1)
    guard.positive("count", count)
    return Eval(
        "claim",
        (keyspace.queue_key(queue, "pending"), keyspace.queue_key(queue, "active")),
        (keyspace.base(queue), str(lease_ms), str(count)),
    )


@verb
def claim(queue: str, lease_ms: int) -> Verb[Claim | None]:
    """Lease the next pending job (mint order) until SERVER now + ``lease_ms``.

    Increments ``attempts`` and returns it as the token, or ``None`` when pending is empty.
    """

    def first(reply: Any) -> Claim | None:
        got = _claims(reply)
        return got[0] if got else None

    return single(_claim_step(queue, lease_ms, 1), first)


@verb
def claim_many(queue: str, lease_ms: int, count: int) -> Verb[list[Claim]]:
    """Lease up to ``count`` pending jobs in mint order in one atomic call."""
    return single(_claim_step(queue, lease_ms, count), _claims)


def _held(queue: str, job_id: str, token: int) -> tuple[str, str]:
    guard.string("job_id", job_id)
    guard.integer("token", token)
    return keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "active")


def _result(result: bytes | str | None, keep_result_ms: int | None) -> tuple[bytes | str, ...]:
    """The ack scripts' result pair, checked: ``()`` for none."""
    if result is None:
        if keep_result_ms is not None:
            raise ValueError("keep_result_ms needs a result")
        return ()
    guard.payload(result, "result")
    if keep_result_ms is None:
        raise ValueError("a result needs keep_result_ms (how long to keep it)")
    guard.span("keep_result_ms", keep_result_ms, minimum=1)
    return (result, str(keep_result_ms))


def _ack_step(
    queue: str, job_id: str, token: int, keep: bool, result: tuple[bytes | str, ...] = ()
) -> Eval:
    row, active = _held(queue, job_id, token)
    return Eval(
        "ack",
        (row, active, keyspace.queue_key(queue, "completed")),
        (job_id, str(token), "1" if keep else "0", *result),
    )


@verb
def ack(
    queue: str,
    job_id: str,
    token: int,
    keep: bool = True,
    *,
    result: bytes | str | None = None,
    keep_result_ms: int | None = None,
) -> Verb[None]:
    """Complete a job in hand, fenced on ``token``.

    ``keep=True`` writes ``state=completed`` (and ``completed_at``, SERVER ms) and indexes
    it for retention; ``keep=False`` deletes the row. ``result`` (the JSON text of the
    return value) is written to ``emq:{q}:result:<id>`` for ``keep_result_ms`` (SERVER
    clock, PX) in the same script, so it outlives a deleted row (``jobs.result``).
    """
    step = _ack_step(queue, job_id, token, keep, _result(result, keep_result_ms))
    return single(step, lambda _: None)


Held = tuple[str, int] | tuple[str, int, bytes | str | None, int | None]


def _ack_many_steps(queue: str, held: Iterable[Held], keep: bool) -> tuple[Eval, ...]:
    plain: list[Any] = []
    rich: list[Any] = []
    with_results = False
    for item in held:
        job_id, token = item[0], item[1]
        guard.string("job_id", job_id)
        pair = (job_id, str(guard.integer("token", token)))
        got = _result(item[2], item[3]) if len(item) == 4 else ()
        with_results = with_results or bool(got)
        plain += pair
        rich += (*pair, *(got or ("", "")))
    base = keyspace.base(queue)
    keys = (keyspace.queue_key(queue, "active"), keyspace.queue_key(queue, "completed"))
    flag = "1" if keep else "0"
    if with_results:  # the result-carrying form: id, token, result, keep ms per job
        return tuple(Eval("ack_many", keys, (base, flag + "r", *c)) for c in _chunks(rich, 4))
    return tuple(Eval("ack_many", keys, (base, flag, *c)) for c in _chunks(plain, 2))


def _ack_replies(replies: Sequence[Any]) -> list[errors.ServerError | None]:
    out: list[errors.ServerError | None] = []
    for reply in replies:
        if isinstance(reply, errors.ServerError):
            raise reply
        out.extend(None if r == 1 else errors.from_server(text(r)) for r in reply)
    return out


@verb
def ack_many(
    queue: str, held: Iterable[Held], keep: bool = True
) -> Verb[list[errors.ServerError | None]]:
    """``ack`` many ``(job_id, token)`` in one round trip: ``None`` per completed job, or
    the refusal ``ack`` would have raised, in its slot (that job is left as it was).

    An item may be ``(job_id, token, result, keep_result_ms)`` to keep its result, as
    ``ack(..., result=, keep_result_ms=)``."""
    steps = _ack_many_steps(queue, held, keep)

    def calls() -> Verb[list[errors.ServerError | None]]:
        if not steps:
            return []
        return _ack_replies((yield Batch(steps)))

    return calls()


@verb
def ack_and_claim(
    queue: str, held: Iterable[Held], lease_ms: int, count: int, keep: bool = True
) -> Verb[tuple[list[errors.ServerError | None], list[Claim]]]:
    """``ack_many`` then ``claim_many`` in one round trip (pipelined, each its own atomic
    transition): a worker settles what finished and takes the next jobs at once.

    ``count`` 0 claims nothing. Returns (the ack refusals in order, the claims).
    """
    acks = _ack_many_steps(queue, held, keep)
    guard.non_negative("count", count)
    claim = (_claim_step(queue, lease_ms, count),) if count else ()

    def calls() -> Verb[tuple[list[errors.ServerError | None], list[Claim]]]:
        if not acks and not claim:
            return [], []
        replies = yield Batch(acks + claim)
        got = replies[len(acks):]
        if got and isinstance(got[0], errors.ServerError):
            raise got[0]
        return _ack_replies(replies[: len(acks)]), (_claims(got[0]) if got else [])

    return calls()


@verb
def retry(
    queue: str,
    job_id: str,
    token: int,
    delay_ms: int,
    max_attempts: int,
    error: str,
) -> Verb[Outcome]:
    """Fail a job in hand, fenced on ``token``: ``"retrying"`` or ``"dead"``.

    Parks it at SERVER now + ``delay_ms`` as scheduled, or dead-letters it once its attempts
    reach ``max_attempts``. The error text is kept on the row either way. A job whose
    cancel was requested while it ran ends ``"cancelled"`` instead (never retried).
    """
    row, active = _held(queue, job_id, token)
    guard.span("delay_ms", delay_ms)
    guard.positive("max_attempts", max_attempts)
    guard.string("error", error)
    step = Eval(
        "retry",
        (row, active, keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "dead")),
        (job_id, str(token), str(delay_ms), str(max_attempts), error),
    )
    return single(step, lambda r: _RETRY_OUTCOMES[int(r)])


_RETRY_OUTCOMES = {1: Outcome.RETRYING, 2: Outcome.DEAD, 3: Outcome.CANCELLED}


@verb
def delay(
    queue: str, job_id: str, token: int, delay_ms: int, mode: str = "in", native: bool = True
) -> Verb[None]:
    """Send a job in hand back to the schedule without touching its attempts.

    ``mode="in"``: due at SERVER now + ``delay_ms``; ``mode="at"``: ``delay_ms`` is an
    absolute run-at. Never dead-letters. Guards that the value is an int (the seed) and
    that the run-at it makes lies within year 9999. At wire 6 this sends ``EMQ.DELAY``,
    which refuses a grouped row (``EMQSTATE delay lane not native``, nothing written): the
    verb then runs the script, so a grouped job delays on both wires. ``native=False``
    sends the script at once.
    """
    row, active = _held(queue, job_id, token)
    guard.mode(mode)
    guard.at_mode("delay_ms", mode, delay_ms)
    keys = (row, active, keyspace.queue_key(queue, "schedule"))
    args = (job_id, str(token), mode, str(delay_ms))

    def calls() -> Verb[None]:
        if native:
            try:
                yield Eval("delay", keys, args, native="EMQ.DELAY")
                return None
            except errors.StateError as exc:
                if str(exc) != "EMQSTATE delay lane not native":
                    raise
        yield Eval("delay", keys, args)
        return None

    return calls()


@verb
def count_delay(queue: str, job_id: str) -> Verb[int]:
    """Count one self-delay on the job's row (``delays``); the new count.

    The seed's delay leaves attempts alone and the next claim increments them; the
    consumer counts delays so that ``retry`` can keep them out of the retry budget (as
    Oban's snooze does), and a delay never spends an attempt.
    """
    guard.string("job_id", job_id)
    return single(Command(("HINCRBY", keyspace.job_key(queue, job_id), "delays", 1)), int)


@verb
def delays(queue: str, job_id: str) -> Verb[int]:
    """How many self-delays the job's row counts (0 for none or no row)."""
    guard.string("job_id", job_id)
    return single(Command(("HGET", keyspace.job_key(queue, job_id), "delays")),
                  lambda r: int(r or 0))


@verb
def reschedule(queue: str, job_id: str, mode: str, due: int) -> Verb[int]:
    """Rescore a job already on the schedule set (native only, wire 6): 1, or -1 for no row.

    Writes only ``ZADD ... XX``; a job that is not scheduled raises ``StateError``.
    """
    guard.string("job_id", job_id)
    guard.mode(mode)
    guard.at_mode("due", mode, due)
    step = Native(
        "EMQ.RESCHEDULE",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "schedule")),
        (job_id, mode, str(due)),
    )
    return single(step, int)


@verb
def reap(queue: str, batch: int, max_stalled: int = DEFAULT_MAX_STALLED) -> Verb[int]:
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
    return single(step, int)


@verb
def extend(queue: str, job_id: str, token: int, lease_ms: int) -> Verb[int]:
    """Checkpoint a lease: expiry becomes SERVER now + ``lease_ms``; returns that ms."""
    row, active = _held(queue, job_id, token)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval("extend", (row, active), (job_id, str(token), str(lease_ms)))
    return single(step, int)


@verb
def progress(queue: str, job_id: str, token: int, value: str) -> Verb[None]:
    """Record how far a job in hand got (``value``: a JSON text), fenced on ``token``:
    the row's ``progress`` field, shown by ``echomq job`` and the dashboard."""
    row, active = _held(queue, job_id, token)
    guard.payload(value, "value")
    step = Eval("progress", (row, active), (job_id, str(token), value))
    return single(step, lambda _: None)


@verb
def result(queue: str, job_id: str) -> Verb[bytes | None]:
    """The kept result of a completed job (``emq:{q}:result:<id>``), or ``None`` (none was
    kept, it expired on the SERVER clock, or the job has not completed)."""
    guard.string("job_id", job_id)
    key = keyspace.queue_key(queue, f"result:{job_id}")
    return single(Command(("GET", key)), lambda r: r)


_ENDS = frozenset({"completed", "dead", "cancelled"})


@verb
def wait_done(queue: str, job_id: str, timeout_s: float) -> Verb[bool]:
    """Wait up to ``timeout_s`` seconds (HOST clock, as BLPOP's timeout) for the job to end
    (completed, dead or cancelled): True once it has, False at the timeout.

    A job already ended answers at once. Otherwise this blocks on the job's done list
    (``emq:{q}:done:<id>``, a token the ending script leaves when the job was admitted
    with ``notify_ms``), leaving the token for other waiters; no polling loop. A job
    admitted without ``notify_ms`` leaves no token: its state is read again at the timeout.
    """
    guard.string("job_id", job_id)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(f"timeout_s must be a number, not {type(timeout_s).__name__}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    row = keyspace.job_key(queue, job_id)
    done = keyspace.queue_key(queue, f"done:{job_id}")

    def calls() -> Verb[bool]:
        state, token = yield Batch((Command(("HGET", row, "state")), Command(("EXISTS", done))))
        if int(token) or (state is not None and text(state) in _ENDS):
            return True
        # BLMOVE from the list to itself: it blocks like BLPOP but leaves the token (and
        # the key's TTL) in place for every other waiter
        got = yield Command(("BLMOVE", done, done, "RIGHT", "LEFT", f"{timeout_s:.3f}"))
        if got is not None:
            return True
        state = yield Command(("HGET", row, "state"))
        return state is not None and text(state) in _ENDS

    return calls()


class Checkpoint(NamedTuple):
    """A lease checkpoint: the new expiry (SERVER ms) and whether a cancel was requested."""

    expires_ms: int
    cancelled: bool


@verb
def checkpoint(queue: str, job_id: str, token: int, lease_ms: int) -> Verb[Checkpoint]:
    """``extend``, also reporting whether a cancel was requested for the job in hand (the
    holder then stops the handler and calls ``finish_cancelled``). SERVER clock."""
    row, active = _held(queue, job_id, token)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval("extend", (row, active), (job_id, str(token), str(lease_ms), "cancel"))
    return single(step, lambda r: Checkpoint(int(r[0]), bool(int(r[1]))))


_CANCEL_OUTCOMES = {0: Outcome.ABSENT, 1: Outcome.CANCELLED, 2: Outcome.REQUESTED}


@verb
def cancel(queue: str, job_id: str) -> Verb[Outcome]:
    """Cancel a job: ``"cancelled"``, ``"requested"`` or ``"absent"``.

    A waiting job (pending, a lane, scheduled) leaves its set and its row becomes
    ``state=cancelled`` in one transition (``"cancelled"``). An active job is marked
    (``"requested"``): its holder learns it at its next lease checkpoint and ends it with
    ``finish_cancelled``; a retry or reap of it ends it cancelled too, and an ack that lands
    first completes it. An unknown, completed, dead or already cancelled id: ``"absent"``,
    nothing written. ``cancelled_at`` is SERVER ms.
    """
    return single(_cancel_step(queue, job_id), lambda r: _CANCEL_OUTCOMES[int(r)])


def _cancel_step(queue: str, job_id: str) -> Eval:
    guard.string("job_id", job_id)
    return Eval(
        "cancel",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "cancelled")),
        (job_id, keyspace.base(queue)),
    )


@verb
def cancel_many(queue: str, job_ids: Iterable[str]) -> Verb[list[Outcome]]:
    """``cancel`` for many ids in one round trip (each its own atomic transition):
    outcomes in input order. Every id is checked before anything is sent."""
    steps = tuple(_cancel_step(queue, _bulk_id(j)) for j in job_ids)

    def calls() -> Verb[list[Outcome]]:
        if not steps:
            return []
        replies = yield Batch(steps)
        for r in replies:
            if isinstance(r, errors.ServerError):
                raise r
        return [_CANCEL_OUTCOMES[int(r)] for r in replies]

    return calls()


@verb
def finish_cancelled(queue: str, job_id: str, token: int) -> Verb[None]:
    """The holder ends a cancelled job in hand: active -> cancelled, fenced on ``token``."""
    row, active = _held(queue, job_id, token)
    step = Eval("finish_cancelled", (row, active), (job_id, str(token)))
    return single(step, lambda _: None)


def _pause_step(queue: str, flag: str) -> Eval:
    return Eval(
        "pause",
        (keyspace.queue_key(queue, "paused"), keyspace.queue_key(queue, "wake")),
        (flag,),
    )


@verb
def pause(queue: str) -> Verb[bool]:
    """Pause claims on ``queue`` (admission and promote go on); True if it was running."""
    return single(_pause_step(queue, "1"), lambda r: bool(int(r)))


@verb
def resume(queue: str) -> Verb[bool]:
    """Resume claims on ``queue`` and wake a blocked consumer; True if it was paused."""
    return single(_pause_step(queue, "0"), lambda r: bool(int(r)))


@verb
def is_paused(queue: str) -> Verb[bool]:
    """Whether ``queue`` is paused (its claims hand out nothing)."""
    key = keyspace.queue_key(queue, "paused")
    return single(Command(("EXISTS", key)), lambda r: bool(int(r)))


STAT_NAMES = ("enqueued", "completed", "failed", "retried", "dead", "cancelled")


@verb
def stats(queue: str) -> Verb[dict[str, int]]:
    """The queue's server-side counters (``emq:{q}:stats``), kept by the transitions
    themselves: ``enqueued``, ``completed``, ``failed`` (each retry or death), ``retried``,
    ``dead``, ``cancelled``; a counter never bumped reads 0."""
    key = keyspace.queue_key(queue, "stats")

    def decode(reply: Any) -> dict[str, int]:
        got = {text(k): int(v) for k, v in (reply or {}).items()}
        return {name: got.get(name, 0) for name in STAT_NAMES} | got

    return single(Command(("HGETALL", key)), decode)


# -- reads (plain commands; no transition) ------------------------------------------------

# states a fenced outcome leaves behind (ack, retry, delay, or a cancel at a checkpoint)
_SETTLED = frozenset({"completed", "scheduled", "dead", "cancelled"})


@verb
def fate(queue: str, job_id: str, token: int) -> Verb[str]:
    """Where a job stands for the holder of ``token`` once a fenced outcome was refused.

    ``"gone"``: no row (completed and deleted under the default retention, by this
    holder's earlier try or a later one's). ``"settled"``: the row is still at this token
    and no longer running (completed, scheduled by a retry or delay, dead): this holder's
    own earlier try landed, typically a retried call whose first reply was lost in a
    restart. ``"moved"``: a later claim holds it (another token), or its lease lapsed and
    the reaper returned it: it runs again elsewhere. One ``HMGET``; no clock.
    """
    row, _active = _held(queue, job_id, token)

    def decode(reply: Any) -> str:
        state, attempts = reply
        if state is None:
            return "gone"
        if text(state) in _SETTLED and attempts is not None and int(attempts) == token:
            return "settled"
        return "moved"

    return single(Command(("HMGET", row, "state", "attempts")), decode)


STATE_SETS = ("pending", "scheduled", "active", "dead", "completed", "cancelled")
_SET_OF = {"scheduled": "schedule"}


@verb
def get(queue: str, job_id: str) -> Verb[dict[str, Any] | None]:
    """The job's row as a dict (``payload`` as bytes, other fields as str), or ``None``."""
    key = keyspace.job_key(queue, job_id)

    def decode(reply: Any) -> dict[str, Any] | None:
        if not reply:
            return None
        row = {text(k): v for k, v in reply.items()}
        return {k: (v if k == "payload" else text(v)) for k, v in row.items()}

    return single(Command(("HGETALL", key)), decode)


@verb
def counts(queue: str) -> Verb[dict[str, int]]:
    """How many jobs sit in each state set of ``queue`` (one round trip)."""
    keys = [keyspace.queue_key(queue, _SET_OF.get(s, s)) for s in STATE_SETS]

    def calls() -> Verb[dict[str, int]]:
        replies = yield Batch(tuple(Command(("ZCARD", k)) for k in keys))
        return {s: int(n) for s, n in zip(STATE_SETS, replies, strict=True)}

    return calls()


@verb
def server_now_ms() -> Verb[int]:
    """The SERVER clock in ms (``TIME``), the clock the schedule and leases are priced on."""

    def decode(reply: Any) -> int:
        secs, micros = reply
        return int(secs) * 1000 + int(micros) // 1000

    return single(Command(("TIME",)), decode)


@verb
def page(queue: str, state: str, start: int = 0, count: int = 50) -> Verb[list[dict[str, Any]]]:
    """A page of the jobs in ``state`` (one of ``STATE_SETS``) with their set score.

    The score means run-at for ``scheduled``, lease expiry for ``active``, and the SERVER ms
    of completion, death or cancel for ``completed``/``dead``/``cancelled`` (newest first for
    those three); ``pending``
    is in claim order. Each entry: ``{"id", "score", "state", "attempts", "error"}``.
    """
    if state not in STATE_SETS:
        raise ValueError(f"state must be one of {', '.join(STATE_SETS)}, not {state!r}")
    guard.non_negative("start", start)
    guard.positive("count", count)
    key = keyspace.queue_key(queue, _SET_OF.get(state, state))
    newest_first = state in ("completed", "dead", "cancelled")
    read = "ZREVRANGE" if newest_first else "ZRANGE"

    def calls() -> Verb[list[dict[str, Any]]]:
        members = yield Command((read, key, start, start + count - 1, "WITHSCORES"))
        pairs_ = [(text(m), sc) for m, sc in scored(members)]
        if not pairs_:
            return []
        rows = yield Batch(tuple(
            Command(("HMGET", keyspace.job_key(queue, i), "state", "attempts", "error"))
            for i, _ in pairs_
        ))
        out = []
        for (job_id, score), row in zip(pairs_, rows, strict=True):
            st, att, err = row if isinstance(row, list) else (None, None, None)
            out.append({
                "id": job_id,
                "score": int(float(score)),
                "state": text(st) if st is not None else None,
                "attempts": int(att) if att is not None else None,
                "error": text(err) if err is not None else None,
            })
        return out

    return calls()


@verb
def next_due_ms(queue: str) -> Verb[int | None]:
    """Milliseconds from SERVER now until the next instant something becomes claimable by
    time alone (``<= 0`` when it already is), or ``None`` when nothing waits on time.

    The earliest of: the schedule's first run-at, the first group blocked on ``gwait``
    reopening (a rate window or a ``rate_limited``), a queue-level ``rate_limited`` block
    ending, and a full queue rate window reopening. One round trip (the reads and ``TIME``
    pipelined): what a beat loop reads to wake at the next due instant instead of polling.
    """
    base = keyspace.base(queue)

    def calls() -> Verb[int | None]:
        sched, gwait, blocked, rate, log, size, (secs, micros) = yield Batch((
            Command(("ZRANGE", base + "schedule", 0, 0, "WITHSCORES")),
            Command(("ZRANGE", base + "gwait", 0, 0, "WITHSCORES")),
            Command(("PTTL", base + "blocked_until")),
            Command(("HMGET", base + "rate", "max", "ms")),
            Command(("ZRANGE", base + "starts", 0, 0, "WITHSCORES")),
            Command(("HGET", base + "starts:n", "total")),
            Command(("TIME",)),
        ))
        now = int(secs) * 1000 + int(micros) // 1000
        due = [int(float(head[0][1])) - now for head in (scored(sched), scored(gwait)) if head]
        if int(blocked) > 0:
            due.append(int(blocked))
        oldest = scored(log)
        if rate[0] is not None and oldest and int(size or 0) >= int(rate[0]):
            due.append(int(float(oldest[0][1])) + int(rate[1]) - now)
        return min(due) if due else None

    return calls()


@verb
def rate_limited(queue: str, job_id: str, token: int, ms: int) -> Verb[None]:
    """A job in hand met an upstream limit (an HTTP 429): it goes back to wait at its
    priority without spending an attempt, and its group (or, for a flat job, the whole
    queue) claims nothing for ``ms`` (SERVER clock). Token-fenced."""
    row, active = _held(queue, job_id, token)
    guard.span("ms", ms, minimum=1)
    step = Eval("rate_limited", (row, active), (job_id, str(token), str(ms)))
    return single(step, lambda _: None)


def rate_args(max_jobs: int, per_ms: int) -> tuple[str, str]:
    """A checked rate: ``max_jobs`` >= 1 starts in any window of ``per_ms`` >= 1 ms."""
    guard.positive("max_jobs", max_jobs)
    guard.span("per_ms", per_ms, minimum=1)
    return str(max_jobs), str(per_ms)


@verb
def set_rate(queue: str, max_jobs: int, per_ms: int) -> Verb[None]:
    """Cap the queue's claims: never more than ``max_jobs`` starts in any window of
    ``per_ms`` (a sliding-window log of starts on the SERVER clock, exact)."""
    mx, ms = rate_args(max_jobs, per_ms)
    key = keyspace.queue_key(queue, "rate")
    return single(Command(("HSET", key, "max", mx, "ms", ms)), lambda _: None)


@verb
def clear_rate(queue: str) -> Verb[None]:
    """Remove the queue's rate cap (and its log of starts)."""
    keys = (keyspace.queue_key(queue, "rate"), keyspace.queue_key(queue, "starts"),
            keyspace.queue_key(queue, "starts:n"))
    return single(Command(("DEL", *keys)), lambda _: None)
