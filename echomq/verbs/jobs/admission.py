"""Admission: a job enters the queue now (``enqueue``), on the schedule (``enqueue_at``,
``enqueue_in``) or with every option at once (``admit``); ``Options`` checks the options
before any I/O. Clocks: ``in`` is priced on the SERVER clock, ``at`` on the CALLER's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.options import check_unique
from echomq.core.outcomes import Outcome
from echomq.core.steps import Eval, Verb, single, text, verb


def is_admitted(reply: Any) -> bool:
    # 1 admitted; 0 (the id has a row) or the unique key's owner id (bytes): a duplicate
    return not isinstance(reply, (bytes, str)) and int(reply) == 1


def _admission(admitted: Outcome) -> Any:
    def decode(reply: Any) -> Outcome:
        return admitted if is_admitted(reply) else Outcome.DUPLICATE

    return decode


class Admitted(NamedTuple):
    """What an admission did: its outcome, and the id that holds the slot: the job's own id
    when admitted (or when its id already had a row), the OWNER's id when a live unique key
    refused it."""

    outcome: Outcome
    id: str


class Options(NamedTuple):
    """Admission options, checked before any I/O (the defaults are a plain job)."""

    priority: int = 0
    group: str | None = None
    unique: str | None = None
    unique_for_ms: int | None = None
    notify_ms: int | None = None
    #: the deadline as the scripts take it: ``"+<ms>"`` after SERVER now, ``"<ms>"`` an
    #: absolute instant (single admissions only: the bulk tail has no room for it)
    expires: str | None = None

    @classmethod
    def of(
        cls,
        priority: int = 0,
        group: str | None = None,
        unique: str | None = None,
        unique_for_ms: int | None = None,
        notify_ms: int | None = None,
        expires_ms: int | None = None,
        expires_at_ms: int | None = None,
    ) -> Options:
        if (type(priority) is int and priority == 0 and group is None and unique is None
                and unique_for_ms is None and notify_ms is None and expires_ms is None
                and expires_at_ms is None):
            return PLAIN  # the common call: nothing to check
        guard.priority(priority)
        if group is not None:
            keyspace.validate_group(group)
        if unique is not None:
            check_unique(unique)
        if unique_for_ms is not None:
            if unique is None:
                raise ValueError("unique_for_ms needs a unique key")
            guard.span("unique_for_ms", unique_for_ms, minimum=1)
        if notify_ms is not None:
            guard.span("notify_ms", notify_ms, minimum=1)
        return cls(priority, group, unique, unique_for_ms, notify_ms,
                   deadline(expires_ms, expires_at_ms))

    @classmethod
    def from_item(cls, extra: Sequence[Any]) -> Options:
        """The options dict a bulk item may carry as its last element (or none)."""
        if not extra:
            return PLAIN
        if len(extra) > 1 or not isinstance(extra[0], dict):
            raise TypeError("a bulk item's extra element must be one options dict")
        unknown = extra[0].keys() - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unknown admission options: {', '.join(sorted(unknown))}")
        return cls.of(**extra[0])

    @property
    def plain(self) -> bool:
        return self == PLAIN

    def argv(self) -> tuple[str, ...]:
        """The scripts' option tail: priority, group, unique, unique_for ms, notify ms
        ('' for a default)."""
        # one call per bulk item: no helper (unique_for_ms and notify_ms are >= 1 when set)
        priority, group, unique, unique_for_ms, notify_ms, _ = self
        return (str(priority) if priority else "", group or "", unique or "",
                "" if unique_for_ms is None else str(unique_for_ms),
                "" if notify_ms is None else str(notify_ms))

    def tail(self) -> tuple[str, ...]:
        """The single admission scripts' option tail: ``argv()`` and the deadline, when one
        is set."""
        return self.argv() if self.expires is None else (*self.argv(), self.expires)


def deadline(expires_ms: int | None, expires_at_ms: int | None) -> str | None:
    """A deadline as the scripts take it, checked before any I/O: ``expires_ms`` after
    SERVER now (``"+<ms>"``) or ``expires_at_ms`` an absolute instant (``"<ms>"``, the
    caller's clock); not both. ``None`` for none."""
    if expires_ms is not None and expires_at_ms is not None:
        raise ValueError("give expires_ms or expires_at_ms, not both")
    if expires_ms is not None:
        return "+" + str(guard.span("expires_ms", expires_ms, minimum=1))
    if expires_at_ms is not None:
        return str(guard.instant("expires_at_ms", expires_at_ms))
    return None


PLAIN = Options()
#: the options a bulk item's dict may name (no deadline: the bulk tail has no room for it)
_OPTION_NAMES = frozenset(Options._fields) - {"expires"}


def _native_tail(opts: Options) -> tuple[tuple[str, ...], bool]:
    """The option tail, and whether the module takes it: ``EMQ.ENQUEUE``/``EMQ.SCHEDULE``
    admit a flat job with priority, unique key and notify (a kept result); a group (its
    lane and ring) or a deadline rides the script, as does any option the module does not
    know (the tail is then longer than the five it takes)."""
    tail = opts.tail()
    return tail, opts.group is None and len(tail) == 5


def _enqueue_step(queue: str, job_id: str, payload: bytes | str, opts: Options = PLAIN) -> Eval:
    guard.string("job_id", job_id)
    guard.payload(payload)
    keys = (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "pending"))
    if opts.plain:
        return Eval("enqueue", keys, (job_id, payload), native="EMQ.ENQUEUE")
    tail, native = _native_tail(opts)
    return Eval("enqueue", keys, (job_id, payload, *tail),
                native="EMQ.ENQUEUE" if native else None)


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
    native = True
    if not opts.plain:
        tail, native = _native_tail(opts)
        args = (*args, *tail)
    return Eval(
        "schedule",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "schedule")),
        args,
        native="EMQ.SCHEDULE" if native else None,
        via=via,
    )


def check_when(mode: object, value: object) -> None:
    """An admission's ``(mode, value)``: ``"now"`` (value ignored), ``"in"`` a span from
    SERVER now, ``"at"`` an instant on the caller's clock."""
    if mode not in ("now", "in", "at"):
        raise ValueError(f"mode must be 'now', 'in' or 'at', not {mode!r}")
    if mode == "in":
        guard.span("value", value)
    elif mode == "at":
        guard.instant("value", value)


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
    expires_ms: int | None = None,
    expires_at_ms: int | None = None,
) -> Verb[Admitted]:
    """The general admission, every option at once: ``Admitted(outcome, id)``.

    ``mode``: ``"now"`` (claimable now), ``"in"`` (``value`` ms from SERVER now) or ``"at"``
    (``value`` an absolute ms, CALLER's clock). ``unique``: while a job admitted with that
    key is waiting or running (and until SERVER admission + ``unique_for_ms``, if given)
    another admission with the key writes nothing and answers ``DUPLICATE`` with the
    owner's id; the key is released in the script that ends the owner (ack, death, cancel).
    ``notify_ms``: the job's end leaves a done token (``wait_done``) kept that long.
    ``expires_ms`` (after SERVER admission) or ``expires_at_ms`` (an absolute instant, the
    caller's clock): the job's deadline; not started by then, it ends ``expired`` wherever
    it waits and never runs.
    """
    check_when(mode, value)
    opts = Options.of(priority, group, unique, unique_for_ms, notify_ms, expires_ms,
                      expires_at_ms)
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


def _admitted_now(job_id: str) -> Any:
    def decode(reply: Any) -> Admitted:
        if type(reply) is int:
            return Admitted(Outcome.ENQUEUED if reply == 1 else Outcome.DUPLICATE, job_id)
        if isinstance(reply, (bytes, str)):
            return Admitted(Outcome.DUPLICATE, text(reply))
        return Admitted(Outcome.ENQUEUED if int(reply) == 1 else Outcome.DUPLICATE, job_id)

    return decode


@verb
def admit_now(queue: str, job_id: str, payload: bytes | str, opts: Options) -> Verb[Admitted]:
    """``admit(..., mode="now")`` with ``opts`` made by ``Options.of`` once (its guards ran
    then): the task layer's per-call path for a job with options, which it prepares once per
    task. ``Admitted(outcome, id)`` as ``admit``."""
    if type(opts) is not Options:
        raise TypeError(f"opts must be jobs.Options (Options.of(...)), not {type(opts).__name__}")
    return single(_enqueue_step(queue, job_id, payload, opts), _admitted_now(job_id))


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

    Guards that ``run_at_ms`` is an int (not a float) within year 9999 (``ValueError``
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
