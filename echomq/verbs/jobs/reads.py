"""Reads (plain commands; no transition): rows, counts, stats, pages, results, the next
due instant, the server clock, a refused holder's fate, waiting for a job's end."""

from __future__ import annotations

from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace, readings, states
from echomq.core.payload import task_of
from echomq.core.steps import Batch, Command, Verb, scored, single, text, verb
from echomq.verbs.jobs.claims import held_keys


@verb
def result(queue: str, job_id: str) -> Verb[bytes | None]:
    """The kept result of a completed job (``emq:{q}:result:<id>``), or ``None`` (none was
    kept, it expired on the SERVER clock, or the job has not completed)."""
    guard.string("job_id", job_id)
    key = keyspace.queue_key(queue, f"result:{job_id}")
    return single(Command(("GET", key)), lambda r: r)


_ENDS = frozenset({"completed", "dead", "cancelled", "expired"})


@verb
def wait_done(queue: str, job_id: str, timeout_s: float) -> Verb[bool]:
    """Wait up to ``timeout_s`` seconds (HOST clock, as BLPOP's timeout) for the job to end
    (completed, dead, cancelled or expired): True once it has, False at the timeout.

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


STAT_NAMES = ("enqueued", "completed", "failed", "retried", "dead", "cancelled")


@verb
def stats(queue: str) -> Verb[dict[str, int]]:
    """The queue's server-side counters (``emq:{q}:stats``), kept by the transitions
    themselves: ``enqueued``, ``completed``, ``failed`` (each retry or death), ``retried``,
    ``dead``, ``cancelled``; a counter never bumped reads 0. ``corrupt`` (rows a claim
    could not run, ended dead with the reason; each also counted in ``dead``) is there once
    it was bumped, and so is ``expired`` (jobs that missed their deadline)."""
    key = keyspace.queue_key(queue, "stats")

    def decode(reply: Any) -> dict[str, int]:
        got = {text(k): int(v) for k, v in (reply or {}).items()}
        return {name: got.get(name, 0) for name in STAT_NAMES} | got

    return single(Command(("HGETALL", key)), decode)


# -- reads (plain commands; no transition) ------------------------------------------------

# states a fenced outcome leaves behind (ack, retry, delay or a durable sleep, a durable
# wait, or a cancel at a checkpoint)
_SETTLED = frozenset({"completed", "scheduled", "dead", "cancelled", "waiting"})


@verb
def fate(queue: str, job_id: str, token: int) -> Verb[str]:
    """Where a job stands for the holder of ``token`` once a fenced outcome was refused.

    ``"gone"``: no row (completed and deleted under the default retention, by this
    holder's earlier try or a later one's). ``"settled"``: the row is still at this token
    and no longer running (completed, scheduled by a retry, delay or sleep, parked on a
    signal, dead): this holder's
    own earlier try landed, typically a retried call whose first reply was lost in a
    restart. ``"moved"``: a later claim holds it (another token), or its lease lapsed and
    the reaper returned it: it runs again elsewhere. One ``HMGET``; no clock.
    """
    row, _active = held_keys(queue, job_id, token)

    def decode(reply: Any) -> str:
        state, attempts = reply
        if state is None:
            return "gone"
        if text(state) in _SETTLED and readings.whole(attempts) == token:
            return "settled"
        return "moved"

    return single(Command(("HMGET", row, "state", "attempts")), decode)


#: the states ``counts`` and ``page`` read (each on its set, ``states.SET_OF``)
STATE_SETS = ("pending", "scheduled", "active", "dead", "completed", "cancelled")
#: states ``counts`` reports only when their set holds jobs (a queue that uses no deadline
#: or durable wait answers the same counts as before those existed); ``page`` reads them
#: like the rest (``waiting``: jobs parked on a signal, ``verbs.durable``)
SPARSE_SETS = ("expired", "waiting")
_SET_OF = states.SET_OF


@verb
def get(queue: str, job_id: str) -> Verb[dict[str, Any] | None]:
    """The job's row as a dict (``payload`` and a durable step's result, ``out:<name>``, as
    bytes: both may be a codec's binary; other fields as str), or ``None``."""
    key = keyspace.job_key(queue, job_id)

    def decode(reply: Any) -> dict[str, Any] | None:
        if not reply:
            return None
        row = {text(k): v for k, v in reply.items()}
        return {k: (v if k == "payload" or k.startswith("out:") else text(v))
                for k, v in row.items()}

    return single(Command(("HGETALL", key)), decode)


@verb
def counts(queue: str) -> Verb[dict[str, int]]:
    """How many jobs sit in each state set of ``queue`` (one round trip): every state of
    ``STATE_SETS``, and ``expired`` and ``waiting`` (jobs parked on a signal) when their set
    holds jobs."""
    names = STATE_SETS + SPARSE_SETS
    keys = [keyspace.queue_key(queue, _SET_OF.get(s, s)) for s in names]

    def calls() -> Verb[dict[str, int]]:
        replies = yield Batch(tuple(Command(("ZCARD", k)) for k in keys))
        return {s: int(n) for s, n in zip(names, replies, strict=True)
                if int(n) or s in STATE_SETS}

    return calls()


@verb
def server_now_ms() -> Verb[int]:
    """The SERVER clock in ms (``TIME``), the clock the schedule and leases are priced on."""

    def decode(reply: Any) -> int:
        secs, micros = reply
        return int(secs) * 1000 + int(micros) // 1000

    return single(Command(("TIME",)), decode)


def _task(data: Any) -> str | None:
    if data is None:
        return None
    try:
        return task_of(data)
    except ValueError:  # not a task payload (a Consumer's own bytes)
        return None


@verb
def page(queue: str, state: str, start: int = 0, count: int = 50) -> Verb[list[dict[str, Any]]]:
    """A page of the jobs in ``state`` (one of ``STATE_SETS``) with their set score.

    The score means run-at for ``scheduled``, lease expiry for ``active``, the SERVER ms a
    job parked for ``waiting``, and the SERVER ms
    of completion, death, cancel or expiry for ``completed``/``dead``/``cancelled``/
    ``expired`` (newest first for those four); ``pending``
    is in claim order. Each entry: ``{"id", "score", "state", "attempts", "error", "task"}``
    (the task its payload names, an encrypted one's too; ``None`` for no task payload). A
    score past the instants a ``datetime`` holds (``inf``, ``1e300`` written by another
    client) reads clamped (``core.readings.score_ms``), an attempts that is no number None.
    """
    if state not in STATE_SETS + SPARSE_SETS:
        raise ValueError(f"state must be one of {', '.join(STATE_SETS + SPARSE_SETS)}, "
                         f"not {state!r}")
    guard.non_negative("start", start)
    guard.positive("count", count)
    key = keyspace.queue_key(queue, _SET_OF.get(state, state))
    newest_first = state in ("completed", "dead", "cancelled", "expired")
    read = "ZREVRANGE" if newest_first else "ZRANGE"

    def calls() -> Verb[list[dict[str, Any]]]:
        members = yield Command((read, key, start, start + count - 1, "WITHSCORES"))
        pairs_ = [(text(m), sc) for m, sc in scored(members)]
        if not pairs_:
            return []
        rows = yield Batch(tuple(
            Command(("HMGET", keyspace.job_key(queue, i), "state", "attempts", "error",
                     "payload"))
            for i, _ in pairs_
        ))
        out = []
        for (job_id, score), row in zip(pairs_, rows, strict=True):
            st, att, err, data = row if isinstance(row, list) else (None, None, None, None)
            out.append({
                "id": job_id,
                "score": readings.score_ms(score),
                "state": readings.text_of(st) if st is not None else None,
                "attempts": readings.whole(att),
                "error": readings.text_of(err) if err is not None else None,
                "task": _task(data),
            })
        return out

    return calls()


class Due(NamedTuple):
    """What a beat reads after promote: ``ms`` until the next instant something becomes
    claimable by time alone (``next_due_ms``; the earliest deadline counts, so the legs
    wake for the sweep at a durable wait's timeout), and ``deadline_ms`` until the
    earliest deadline (of a job admitted with one, or a wait's timeout; ``<= 0``: the
    deadline sweep has work), each ``None`` when there is none. SERVER clock."""

    ms: int | None
    deadline_ms: int | None


@verb
def next_due(queue: str) -> Verb[Due]:
    """``next_due_ms`` and the earliest deadline, in the same one round trip."""
    base = keyspace.base(queue)

    def calls() -> Verb[Due]:
        (sched, gwait, blocked, paused, rate, log, size, deadlines,
         (secs, micros)) = yield Batch((
            Command(("ZRANGE", base + "schedule", 0, 0, "WITHSCORES")),
            Command(("ZRANGE", base + "gwait", 0, 0, "WITHSCORES")),
            Command(("PTTL", base + "blocked_until")),
            Command(("PTTL", base + "paused")),
            Command(("HMGET", base + "rate", "max", "ms")),
            Command(("ZRANGE", base + "starts", 0, 0, "WITHSCORES")),
            Command(("HGET", base + "starts:n", "total")),
            Command(("ZRANGE", base + "deadlines", 0, 0, "WITHSCORES")),
            Command(("TIME",)),
        ))
        now = int(secs) * 1000 + int(micros) // 1000
        # a score another client wrote (inf, -1e300) is clamped, not raised: a beat loop
        # reads this every beat (core.readings)
        due = [readings.score_ms(head[0][1]) - now
               for head in (scored(sched), scored(gwait)) if head]
        for ttl in (int(blocked), int(paused)):  # a pause with an end (pause(until=)) too
            if ttl > 0:
                due.append(ttl)
        oldest = scored(log)
        cap = readings.whole(rate[0])
        if cap is not None and oldest and (readings.whole(size) or 0) >= cap:
            due.append(readings.score_ms(oldest[0][1]) + (readings.whole(rate[1]) or 0) - now)
        head = scored(deadlines)
        deadline = readings.score_ms(head[0][1]) - now if head else None
        if deadline is not None:  # the sweep's work: a durable wait's timeout resumes a job
            due.append(deadline)
        return Due(min(due) if due else None, deadline)

    return calls()


@verb
def next_due_ms(queue: str) -> Verb[int | None]:
    """Milliseconds from SERVER now until the next instant something becomes claimable by
    time alone (``<= 0`` when it already is), or ``None`` when nothing waits on time.

    The earliest of: the schedule's first run-at, the first group blocked on ``gwait``
    reopening (a rate window, a ``rate_limited``, a group pause with an end), a
    queue-level ``rate_limited`` block ending, a queue pause with an end ending, a full
    queue rate window reopening, and the first deadline (the sweep's: a durable wait's
    timeout puts its job back to pending). One round trip (the reads and ``TIME`` pipelined):
    what a beat loop reads to wake at the next due instant instead of polling.
    """
    steps = next_due.steps(queue)

    def calls() -> Verb[int | None]:
        return (yield from steps).ms

    return calls()
