"""The dead-letter set: list what died and why, and send jobs back for a fresh run.

``emq:{q}:dead`` holds dead ids scored by the SERVER ms they died (``died_at`` on the row
as well); ``revive`` is one atomic transition (the ``revive`` script): off the dead set,
``state=pending`` with ``attempts=0`` (a fresh budget), back on pending with a wake token.
Works on either connector, like the verbs in ``jobs``.
"""

from __future__ import annotations

from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace, readings
from echomq.core.steps import Batch, Command, Eval, Verb, scored, single, text, verb


@verb
def list_dead(queue: str, start: int = 0, count: int = 50) -> Verb[list[dict[str, Any]]]:
    """Dead jobs, most recent first: ``{"id", "died_at", "attempts", "error", "payload",
    "runs", "failures", "delays"}`` (``runs`` = ``attempts``: ``echomq.core.tally``).

    ``died_at`` is the SERVER ms the job died (its score on the dead set; a hostile score is
    clamped to the instants a ``datetime`` holds, ``core.readings``); ``attempts`` is
    ``None`` when absent or no number.
    """
    guard.non_negative("start", start)
    guard.positive("count", count)
    dead = keyspace.queue_key(queue, "dead")

    def calls() -> Verb[list[dict[str, Any]]]:
        members = scored((yield Command(("ZREVRANGE", dead, start, start + count - 1,
                                          "WITHSCORES"))))
        if not members:
            return []
        ids = [text(m) for m, _ in members]
        rows = yield Batch(tuple(
            Command(("HMGET", keyspace.job_key(queue, i), "attempts", "error", "payload",
                     "failures", "delays"))
            for i in ids
        ))
        out = []
        for (_m, score), job_id, row in zip(members, ids, rows, strict=True):
            # a key that is not a hash answers an error in its slot: shown as no fields
            attempts, error, payload, failures, delays = (
                row if isinstance(row, list) else (None,) * 5)
            out.append({
                "id": job_id,
                "died_at": readings.score_ms(score),
                "attempts": readings.whole(attempts),
                "error": readings.text_of(error) if error is not None else None,
                "payload": payload,
                "runs": readings.whole(attempts, 0),
                "failures": readings.whole(failures, 0),
                "delays": readings.whole(delays, 0),
            })
        return out

    return calls()


@verb
def count(queue: str) -> Verb[int]:
    """How many jobs sit on the dead set."""
    return single(Command(("ZCARD", keyspace.queue_key(queue, "dead"))), int)


def _revive_step(queue: str, job_id: str) -> Eval:
    guard.string("job_id", job_id)
    return Eval(
        "revive",
        (
            keyspace.job_key(queue, job_id),
            keyspace.queue_key(queue, "dead"),
            keyspace.queue_key(queue, "pending"),
        ),
        (job_id,),
    )


@verb
def revive(queue: str, job_id: str) -> Verb[None]:
    """Send one dead job back to pending with a fresh attempt budget.

    Refusals: ``KindError`` (not a JOB id), ``GoneError`` (no row), ``StateError``
    (``EMQSTATE revive not dead``).
    """
    return single(_revive_step(queue, job_id), lambda _: None)


@verb
def revive_all(queue: str, batch: int = 500) -> Verb[int]:
    """Revive up to ``batch`` dead jobs (oldest first) in one round trip; how many moved."""
    guard.positive("batch", batch)
    dead = keyspace.queue_key(queue, "dead")

    def calls() -> Verb[int]:
        members = yield Command(("ZRANGE", dead, 0, batch - 1))
        if not members:
            return 0
        replies = yield Batch(tuple(_revive_step(queue, text(m)) for m in members))
        return sum(1 for r in replies if not isinstance(r, Exception))

    return calls()
