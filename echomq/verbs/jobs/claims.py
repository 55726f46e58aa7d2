"""Jobs in hand: promote (schedule -> pending), claims and their leases (reap, extend,
checkpoint, progress). Every lease is priced on the SERVER clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, native_or_script, single, text, verb

DEFAULT_MAX_STALLED = 2


class Claim(NamedTuple):
    """A job in hand: its id, the fencing token (= its attempts after this claim) and payload."""

    id: str
    token: int
    payload: bytes


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


def claims_of(reply: Sequence[Any]) -> list[Claim]:
    return [
        Claim(text(reply[i]), int(reply[i + 1]), reply[i + 2]) for i in range(0, len(reply), 3)
    ]


def claim_step(queue: str, lease_ms: int, count: int, claim_id: str | None = None) -> Eval:
    """The claim script's step. ``claim_id`` (chosen by the caller, fresh per claim and
    sent again on a retry) makes a claim whose reply was lost answer the same jobs again
    instead of leaving them leased to no one for a lease (``EMQ.CLAIM`` records a first
    use as the script does and hands a replay back to the script)."""
    guard.span("lease_ms", lease_ms, minimum=1)
    guard.positive("count", count)
    args: tuple[str, ...] = (keyspace.base(queue), str(lease_ms), str(count))
    if claim_id is not None:
        guard.string("claim_id", claim_id)
        args += (claim_id,)
    return Eval(
        "claim",
        (keyspace.queue_key(queue, "pending"), keyspace.queue_key(queue, "active")),
        args,
        native="EMQ.CLAIM",
    )


@verb
def claim(queue: str, lease_ms: int) -> Verb[Claim | None]:
    """Lease the next pending job (mint order) until SERVER now + ``lease_ms``.

    Increments ``attempts`` and returns it as the token, or ``None`` when pending is empty.
    At wire 6 this sends ``EMQ.CLAIM``, which hands what it leaves to the script (a queue
    rate, an unusual row) back, and the script runs then.
    """
    step = claim_step(queue, lease_ms, 1)

    def calls() -> Verb[Claim | None]:
        got = claims_of((yield from native_or_script(step)))
        return got[0] if got else None

    return calls()


@verb
def claim_many(queue: str, lease_ms: int, count: int, claim_id: str | None = None
               ) -> Verb[list[Claim]]:
    """Lease up to ``count`` pending jobs in mint order in one atomic call (at wire 6
    ``EMQ.CLAIM``, as ``claim``). ``claim_id``: see ``claim_step``; sent again after a
    lost reply, the same jobs come back (those still held under their token)."""
    step = claim_step(queue, lease_ms, count, claim_id)

    def calls() -> Verb[list[Claim]]:
        return claims_of((yield from native_or_script(step)))

    return calls()


def held_keys(queue: str, job_id: str, token: int) -> tuple[str, str]:
    guard.string("job_id", job_id)
    guard.integer("token", token)
    return keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "active")


@verb
def reap(queue: str, batch: int, max_stalled: int = DEFAULT_MAX_STALLED) -> Verb[int]:
    """Return up to ``batch`` leases expired at SERVER now to pending; the count handled.

    Each counts a stall; a job that stalls more than ``max_stalled`` times is dead-lettered.
    """
    return single(_reap_step(queue, batch, max_stalled, False), int)


@verb
def reap_ids(queue: str, batch: int, max_stalled: int = DEFAULT_MAX_STALLED
             ) -> Verb[list[str]]:
    """``reap``, answering the ids it handled (so a worker's log can name them)."""
    return single(_reap_step(queue, batch, max_stalled, True),
                  lambda reply: [text(i) for i in reply])


def _reap_step(queue: str, batch: int, max_stalled: int, ids: bool) -> Eval:
    guard.positive("batch", batch)
    guard.non_negative("max_stalled", max_stalled)
    return Eval(
        "reap",
        (
            keyspace.queue_key(queue, "active"),
            keyspace.queue_key(queue, "pending"),
            keyspace.queue_key(queue, "dead"),
        ),
        (keyspace.base(queue), str(batch), str(max_stalled), *(("1",) if ids else ())),
    )


@verb
def extend(queue: str, job_id: str, token: int, lease_ms: int) -> Verb[int]:
    """Checkpoint a lease: expiry becomes SERVER now + ``lease_ms``; returns that ms."""
    row, active = held_keys(queue, job_id, token)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval("extend", (row, active), (job_id, str(token), str(lease_ms)))
    return single(step, int)


@verb
def progress(queue: str, job_id: str, token: int, value: str) -> Verb[None]:
    """Record how far a job in hand got (``value``: a JSON text), fenced on ``token``:
    the row's ``progress`` field, shown by ``echomq job`` and the dashboard."""
    row, active = held_keys(queue, job_id, token)
    guard.payload(value, "value")
    step = Eval("progress", (row, active), (job_id, str(token), value))
    return single(step, lambda _: None)


class Checkpoint(NamedTuple):
    """A lease checkpoint: the new expiry (SERVER ms) and whether a cancel was requested."""

    expires_ms: int
    cancelled: bool


@verb
def checkpoint(queue: str, job_id: str, token: int, lease_ms: int) -> Verb[Checkpoint]:
    """``extend``, also reporting whether a cancel was requested for the job in hand (the
    holder then stops the handler and calls ``finish_cancelled``). SERVER clock."""
    row, active = held_keys(queue, job_id, token)
    guard.span("lease_ms", lease_ms, minimum=1)
    step = Eval("extend", (row, active), (job_id, str(token), str(lease_ms), "cancel"))
    return single(step, lambda r: Checkpoint(int(r[0]), bool(int(r[1]))))
