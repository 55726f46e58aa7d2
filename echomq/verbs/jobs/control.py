"""Queue and job control: cancel, pause/resume, the queue's rate cap (set by an operator,
or declared by an app's tasks and applied when a worker starts: ``declare_rate``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.steps import Batch, Command, Eval, Verb, single, text, verb
from echomq.core.times import to_epoch_ms
from echomq.verbs.jobs.bulk import bulk_id
from echomq.verbs.jobs.claims import held_keys

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
    steps = tuple(_cancel_step(queue, bulk_id(j)) for j in job_ids)

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
    row, active = held_keys(queue, job_id, token)
    step = Eval("finish_cancelled", (row, active), (job_id, str(token)))
    return single(step, lambda _: None)


def _pause_step(queue: str, flag: str, until: str = "") -> Eval:
    return Eval(
        "pause",
        (keyspace.queue_key(queue, "paused"), keyspace.queue_key(queue, "wake")),
        (flag, until) if until else (flag,),
    )


def until_arg(until: int | dt.datetime | None) -> str:
    """A pause's end as the scripts take it: epoch ms (an int, SERVER clock) or a
    ``datetime`` (naive = local time); ``""`` for none. Checked before any I/O."""
    if until is None:
        return ""
    return str(guard.instant("until", to_epoch_ms(until)))


@verb
def pause(queue: str, until: int | dt.datetime | None = None) -> Verb[bool]:
    """Pause claims on ``queue`` (admission and promote go on); True if it was running.

    ``until`` (epoch ms or a ``datetime``, read on the SERVER clock): the pause ends by
    itself at that instant, and the idle consumers wake for it (no beat's wait). A pause
    of a paused queue sets its end (without ``until``: it lasts until ``resume``); an
    ``until`` already past resumes the queue.
    """
    return single(_pause_step(queue, "1", until_arg(until)), lambda r: bool(int(r)))


@verb
def resume(queue: str) -> Verb[bool]:
    """Resume claims on ``queue`` and wake a blocked consumer; True if it was paused."""
    return single(_pause_step(queue, "0"), lambda r: bool(int(r)))


@verb
def paused_until(queue: str) -> Verb[int | None]:
    """When ``queue``'s pause ends by itself (SERVER epoch ms), or ``None`` (not paused,
    or paused until resumed)."""
    key = keyspace.queue_key(queue, "paused")
    return single(Command(("PEXPIRETIME", key)), lambda r: int(r) if int(r) > 0 else None)


@verb
def is_paused(queue: str) -> Verb[bool]:
    """Whether ``queue`` is paused (its claims hand out nothing)."""
    key = keyspace.queue_key(queue, "paused")
    return single(Command(("EXISTS", key)), lambda r: bool(int(r)))


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
    """Remove the queue's rate cap (and its log of starts, and the mark of a declared
    rate: the next worker start applies its app's declared rate, if any)."""
    keys = (keyspace.queue_key(queue, "rate"), keyspace.queue_key(queue, "starts"),
            keyspace.queue_key(queue, "starts:n"), keyspace.queue_key(queue, "rate:declared"))
    return single(Command(("DEL", *keys)), lambda _: None)


@verb
def declare_rate(queue: str, rate: tuple[int, int] | None) -> Verb[tuple[str, str]]:
    """Apply the rate an app's tasks declare for ``queue`` (``(max_jobs, per_ms)``, or
    ``None`` for none), as a worker does when it starts: ``(outcome, "max/ms" in force)``.

    Outcomes: ``"applied"``, ``"same"`` (already in force), ``"kept"`` (the rate in force
    was set by an operator, ``set_rate``/``echomq rate``, after a worker last applied one:
    it stays until ``clear_rate``), ``"cleared"`` (the app no longer declares the rate a
    worker applied), ``"none"``. One atomic transition (the ``declare_rate`` script)."""
    args = ("", "") if rate is None else rate_args(*rate)
    step = Eval("declare_rate",
                (keyspace.queue_key(queue, "rate"), keyspace.queue_key(queue, "rate:declared"),
                 keyspace.queue_key(queue, "starts"), keyspace.queue_key(queue, "starts:n")),
                args)
    return single(step, lambda r: (text(r[0]), text(r[1])))


@verb
def set_limit(queue: str, concurrency: int | None) -> Verb[None]:
    """At most ``concurrency`` (>= 1) of the queue's jobs active at once across every
    worker (live leases on active, counted by the claim on the SERVER clock, so a crashed
    holder's slot frees when its lease lapses); ``None`` removes the cap."""
    key = keyspace.queue_key(queue, "limit")
    if concurrency is None:  # the marker too: the next worker start applies a declared cap
        marker = keyspace.queue_key(queue, "limit:declared")
        return single(Command(("DEL", key, marker)), lambda _: None)
    guard.positive("concurrency", concurrency)
    return single(Command(("SET", key, str(concurrency))), lambda _: None)


@verb
def queue_limit(queue: str) -> Verb[int | None]:
    """The queue's cap (``set_limit``), ``None`` when it has none."""
    key = keyspace.queue_key(queue, "limit")
    return single(Command(("GET", key)), lambda r: None if r is None else int(r))


@verb
def declare_limit(queue: str, concurrency: int | None) -> Verb[tuple[str, str]]:
    """Apply the cap an app's tasks declare for ``queue`` (``queue_limit=``; ``None`` for
    none), as a worker does when it starts: ``(outcome, cap in force)``, the outcomes of
    ``declare_rate`` (an operator's ``set_limit`` is ``"kept"``)."""
    if concurrency is not None:
        guard.positive("queue_limit", concurrency)
    step = Eval("declare_limit", (keyspace.queue_key(queue, "limit"),
                                  keyspace.queue_key(queue, "limit:declared")),
                ("" if concurrency is None else str(concurrency),))
    return single(step, lambda r: (text(r[0]), text(r[1])))
