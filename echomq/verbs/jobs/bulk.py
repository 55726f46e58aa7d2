"""Bulk admission: many jobs per script call (``CHUNK`` per call), every chunk pipelined in
one round trip; every item is checked before anything is sent."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.steps import Batch, Eval, Verb, text, verb
from echomq.verbs.jobs.admission import Admitted, Options, check_when, is_admitted

# jobs per bulk script call: long enough to amortize a call, short enough not to stall the server
CHUNK = 500


def job_chunks(flat: list[Any], per_job: int) -> list[list[Any]]:
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
    steps = tuple(Eval(script, keys, (base, *chunk)) for chunk in job_chunks(flat, per_job))
    if not steps:
        return []
    replies = yield Batch(steps)
    modes = flat[2::per_job]
    out: list[Outcome] = []
    for reply in replies:
        if isinstance(reply, errors.ServerError):
            raise reply
        if admitted is not None and owners is None:
            # 1 admitted; 0 or an owner's id (bytes) a duplicate, as is_admitted says
            dup = Outcome.DUPLICATE
            out += [admitted if r == 1 else dup for r in reply]
            continue
        for r in reply:
            ok = admitted
            if ok is None:
                ok = Outcome.ENQUEUED if modes[len(out)] == "now" else Outcome.SCHEDULED
            if owners is not None:
                owners.append(text(r) if isinstance(r, (bytes, str)) else None)
            out.append(ok if is_admitted(r) else Outcome.DUPLICATE)
    return out


def bulk_id(job_id: object) -> str:
    # the bulk scripts refuse a whole chunk for one foreign id; checking here first keeps
    # "a refusal writes nothing" true across chunks too
    guard.string("job_id", job_id)
    assert isinstance(job_id, str)
    if not job_id.startswith("JOB"):
        raise errors.KindError("EMQKIND job id must be JOB-namespaced")
    return job_id


# The plain item shapes, checked inline: a bulk call's client cost is per item, and the
# common item (an id and a payload, no options) needs only two type checks and a prefix.
# Anything else (a wrong type, an options dict, another length) returns None and takes the
# general loop, which raises the guards' own errors or routes options to @admit_many.

def _plain_pairs(items: list[Any]) -> list[Any] | None:
    """``[id1, payload1, id2, ...]`` when every item is a plain ``(job_id, payload)``."""
    flat: list[Any] = []
    for item in items:
        if type(item) is not tuple or len(item) != 2:
            return None
        job_id, payload = item
        if (type(job_id) is not str or not job_id.startswith("JOB")
                or (type(payload) is not bytes and type(payload) is not str)):
            return None
        flat += item
    return flat


def _plain_quads(items: list[Any]) -> list[Any] | None:
    """``[id, payload, mode, value, ...]`` when every item is a plain ``(job_id, payload,
    mode, value)`` whose value is in range (``guard.span`` for "in", ``guard.instant``
    for "at")."""
    flat: list[Any] = []
    span = guard.max_span_ms()  # "in": priced once per call on the HOST clock, as guard.span
    instant = guard.MAX_TIME_MS
    for item in items:
        if type(item) is not tuple or len(item) != 4:
            return None
        job_id, payload, mode, value = item
        if (type(job_id) is not str or not job_id.startswith("JOB")
                or (type(payload) is not bytes and type(payload) is not str)
                or type(value) is not int):
            return None
        if mode == "in":
            if not 0 <= value <= span:
                return None
        elif mode != "at" or not -instant <= value <= instant:
            return None
        flat += item
    return flat


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
        check_when(mode, value)
        rows.append((bulk_id(job_id), guard.payload(payload), mode, value,
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
    items = items if isinstance(items, list) else list(items)
    flat = _plain_pairs(items)
    if flat is None:
        rows: list[tuple[Any, ...]] = []
        for job_id, payload, *extra in items:
            rows.append((bulk_id(job_id), guard.payload(payload), "now", 0,
                         Options.from_item(extra)))
        if any(not r[4].plain for r in rows):
            return _admit_many(queue, rows)
        flat = [x for job_id, payload, *_ in rows for x in (job_id, payload)]
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
    items = items if isinstance(items, list) else list(items)
    flat = _plain_quads(items)
    if flat is None:
        rows: list[tuple[Any, ...]] = []
        for job_id, payload, mode, value, *extra in items:
            guard.mode(mode)
            guard.span("value", value) if mode == "in" else guard.instant("value", value)
            rows.append((bulk_id(job_id), guard.payload(payload), mode, value,
                         Options.from_item(extra)))
        if any(not r[4].plain for r in rows):
            return _admit_many(queue, rows)
        flat = [x for job_id, payload, mode, value, _ in rows
                for x in (job_id, payload, mode, value)]
    return _bulk_admissions(
        "schedule_many", (keyspace.queue_key(queue, "schedule"),), queue, flat, 4,
        Outcome.SCHEDULED,
    )
