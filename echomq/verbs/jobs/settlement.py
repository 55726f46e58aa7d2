"""Settling a job in hand, fenced on its token: ack (one, many, with the next claims),
retry, delay (and its ``delays`` count), reschedule, rate_limited. SERVER clock."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.steps import (
    Command,
    Eval,
    Native,
    Verb,
    batch_or_script,
    native_or_script,
    single,
    text,
    verb,
)
from echomq.core.tally import Tally
from echomq.verbs.jobs.bulk import job_chunks
from echomq.verbs.jobs.claims import Claim, claim_step, claims_of, held_keys


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
    row, active = held_keys(queue, job_id, token)
    return Eval(
        "ack",
        (row, active, keyspace.queue_key(queue, "completed")),
        (job_id, str(token), "1" if keep else "0", *result),
        native="EMQ.ACK",
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

    def calls() -> Verb[None]:
        yield from native_or_script(step)  # EMQ.ACK at wire 6, or the script

    return calls()


AckEntry = tuple[str, int] | tuple[str, int, bytes | str | None, int | None]


def _ack_many_steps(queue: str, held: Iterable[AckEntry], keep: bool) -> tuple[Eval, ...]:
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
        return tuple(Eval("ack_many", keys, (base, flag + "r", *c), native="EMQ.ACKMANY")
                     for c in job_chunks(rich, 4))
    return tuple(Eval("ack_many", keys, (base, flag, *c), native="EMQ.ACKMANY")
                 for c in job_chunks(plain, 2))


def _ack_replies(replies: Sequence[Any]) -> list[errors.ServerError | None]:
    out: list[errors.ServerError | None] = []
    for reply in replies:
        if isinstance(reply, errors.ServerError):
            raise reply
        out.extend(None if r == 1 else errors.from_server(text(r)) for r in reply)
    return out


@verb
def ack_many(
    queue: str, held: Iterable[AckEntry], keep: bool = True
) -> Verb[list[errors.ServerError | None]]:
    """``ack`` many ``(job_id, token)`` in one round trip: ``None`` per completed job, or
    the refusal ``ack`` would have raised, in its slot (that job is left as it was).

    An item may be ``(job_id, token, result, keep_result_ms)`` to keep its result, as
    ``ack(..., result=, keep_result_ms=)``."""
    steps = _ack_many_steps(queue, held, keep)

    def calls() -> Verb[list[errors.ServerError | None]]:
        if not steps:
            return []
        return _ack_replies((yield from batch_or_script(steps)))

    return calls()


@verb
def ack_and_claim(
    queue: str, held: Iterable[AckEntry], lease_ms: int, count: int, keep: bool = True,
    claim_id: str | None = None,
) -> Verb[tuple[list[errors.ServerError | None], list[Claim]]]:
    """``ack_many`` then ``claim_many`` in one round trip (pipelined, each its own atomic
    transition): a worker settles what finished and takes the next jobs at once.

    ``count`` 0 claims nothing. ``claim_id``: as ``claim_many``'s (sent again after a lost
    reply, the claim answers the jobs it leased; the acks answer as second acks would).
    Returns (the ack refusals in order, the claims).
    """
    acks = _ack_many_steps(queue, held, keep)
    guard.non_negative("count", count)
    claim = (claim_step(queue, lease_ms, count, claim_id),) if count else ()

    def calls() -> Verb[tuple[list[errors.ServerError | None], list[Claim]]]:
        if not acks and not claim:
            return [], []
        replies = yield from batch_or_script(acks + claim)
        got = replies[len(acks):]
        if got and isinstance(got[0], errors.ServerError):
            raise got[0]
        return _ack_replies(replies[: len(acks)]), (claims_of(got[0]) if got else [])

    return calls()


@verb
def ack_and_claim_queues(
    acks: Mapping[str, Iterable[AckEntry]], counts: Mapping[str, int], lease_ms: int,
    keep: bool = True, claim_id: str | None = None,
) -> Verb[tuple[dict[str, list[errors.ServerError | None]], dict[str, list[Claim]]]]:
    """``ack_and_claim`` over several queues (a partitioned queue's partitions) in one round
    trip: each queue's ``ack_many`` for its entries in ``acks``, then ``claim_many`` of
    ``counts[queue]`` jobs for each queue with a positive count, all pipelined (each its
    own atomic transition, on its own slot; on a cluster each goes to its queue's primary).
    ``claim_id``: as ``ack_and_claim``'s, one id for every queue's claim (each records it
    under its own queue).

    Returns (the ack refusals in order, per queue in ``acks``; the claims, per queue in
    ``counts``). A refused claim raises, as ``ack_and_claim``'s does.
    """
    ack_steps: list[tuple[str, tuple[Eval, ...]]] = [
        (q, _ack_many_steps(q, held, keep)) for q, held in acks.items()]
    claim_steps: list[tuple[str, Eval]] = []
    for q, n in counts.items():
        if guard.non_negative("count", n):
            claim_steps.append((q, claim_step(q, lease_ms, n, claim_id)))

    def calls() -> Verb[tuple[dict[str, list[errors.ServerError | None]],
                              dict[str, list[Claim]]]]:
        flat = tuple(s for _, steps in ack_steps for s in steps) + tuple(
            s for _, s in claim_steps)
        if not flat:
            return {q: [] for q, _ in ack_steps}, {}
        replies = yield from batch_or_script(flat)
        refusals: dict[str, list[errors.ServerError | None]] = {}
        i = 0
        for q, steps in ack_steps:
            refusals[q] = _ack_replies(replies[i:i + len(steps)])
            i += len(steps)
        got: dict[str, list[Claim]] = {}
        for q, _ in claim_steps:
            reply = replies[i]
            i += 1
            if isinstance(reply, errors.ServerError):
                raise reply
            got[q] = claims_of(reply)
        return refusals, got

    return calls()


@verb
def retry(
    queue: str,
    job_id: str,
    token: int,
    delay_ms: int,
    max_attempts: int,
    error: str,
    traceback: str | None = None,
    keep_errors: int = 0,
) -> Verb[Outcome]:
    """Fail a job in hand, fenced on ``token``: ``"retrying"`` or ``"dead"``.

    Parks it at SERVER now + ``delay_ms`` as scheduled, or dead-letters it once its attempts
    reach ``max_attempts``. The error text is kept on the row either way, and ``traceback``
    (the run's formatted traceback) with it. ``keep_errors`` > 0: the failure joins the
    row's history (``errors``: ``at_ms`` on the SERVER clock, ``run``, ``error``,
    ``traceback``), the last ``keep_errors`` kept, in the same transition. A job whose
    cancel was requested while it ran ends ``"cancelled"`` instead (never retried).
    """
    row, active = held_keys(queue, job_id, token)
    guard.span("delay_ms", delay_ms)
    guard.positive("max_attempts", max_attempts)
    guard.string("error", error)
    guard.non_negative("keep_errors", keep_errors)
    args: tuple[str, ...] = (job_id, str(token), str(delay_ms), str(max_attempts), error)
    if traceback is not None or keep_errors:
        args += (traceback or "", str(keep_errors))
    step = Eval(
        "retry",
        (row, active, keyspace.queue_key(queue, "schedule"), keyspace.queue_key(queue, "dead")),
        args,
    )
    return single(step, lambda r: _RETRY_OUTCOMES[int(r)])


_RETRY_OUTCOMES = {1: Outcome.RETRYING, 2: Outcome.DEAD, 3: Outcome.CANCELLED}


@verb
def delay(
    queue: str, job_id: str, token: int, delay_ms: int, mode: str = "in", native: bool = True
) -> Verb[None]:
    """Send a job in hand back to the schedule without touching its attempts.

    ``mode="in"``: due at SERVER now + ``delay_ms``; ``mode="at"``: ``delay_ms`` is an
    absolute run-at. Never dead-letters. Guards that the value is an int (not a float) and
    that the run-at it makes lies within year 9999. At wire 6 this sends ``EMQ.DELAY``,
    which refuses a grouped row (``EMQSTATE delay lane not native``, nothing written): the
    verb then runs the script, so a grouped job delays on both wires. ``native=False``
    sends the script at once.
    """
    row, active = held_keys(queue, job_id, token)
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

    ``delay`` leaves attempts alone and the next claim increments them; the
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
def tally(queue: str, job_id: str) -> Verb[Tally]:
    """The job's counts: runs, failures, delays, stalled (``echomq.core.tally``); all 0
    for no row. One read."""
    guard.string("job_id", job_id)
    step = Command(("HMGET", keyspace.job_key(queue, job_id), "attempts", "failures",
                    "delays", "stalled"))
    return single(step, lambda r: Tally(*(int(v or 0) for v in r)))


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
def rate_limited(queue: str, job_id: str, token: int, ms: int) -> Verb[None]:
    """A job in hand met an upstream limit (an HTTP 429): it goes back to wait at its
    priority without spending an attempt, and its group (or, for a flat job, the whole
    queue) claims nothing for ``ms`` (SERVER clock). Token-fenced."""
    row, active = held_keys(queue, job_id, token)
    guard.span("ms", ms, minimum=1)
    step = Eval("rate_limited", (row, active), (job_id, str(token), str(ms)))
    return single(step, lambda _: None)
