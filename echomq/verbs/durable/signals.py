"""Durable waits and signals: a job parks on a signal key; a signal resumes every waiter.

The waiter's side is ``wait_for`` (register and read the store, then park unless the
queue holds a copy of the signal), the sender's ``signal`` (store and read the index, then
resume queue by queue, leaving each a copy); the package docstring
(``echomq.verbs.durable``) says why one side always sees the other.
"""

from __future__ import annotations

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Eval, Verb, single, text, verb
from echomq.verbs.durable.journal import Recorded, held_keys, recorded, step_name

#: how long a signal is kept for waiters that park after it was sent (``App(signal_ttl=)``)
DEFAULT_SIGNAL_TTL_MS = 86_400_000


def _value(key: str) -> str:
    return keyspace.signal_key(key, "value")


def _index(key: str) -> str:
    return keyspace.signal_key(key, "queues")


def _resume(queue: str, key: str, payload: bytes | str, ttl_ms: int) -> Eval:
    return Eval("resume", (keyspace.waiters_key(queue, key), keyspace.queue_key(queue, "waiting"),
                           keyspace.queue_key(queue, f"signalled:{key}")),
                (keyspace.base(queue), key, payload, str(ttl_ms)))


@verb
def wait_for(queue: str, job_id: str, token: int, name: str, key: str,
             timeout_ms: int | None = None) -> Verb[Recorded]:
    """Wait step ``name`` of the job in hand for signal ``key``, fenced by ``token``.

    Timeout: ``timeout_ms`` from SERVER now (``None``: none). The answer's step is
    ``done`` with the signal's payload as its result (a signal was stored: taken at once,
    the job stays in hand; or the step was done before), ``timed_out`` (recorded before:
    the handler raises ``errors.SignalTimeout``), or ``waiting``: the job is parked
    (``state = waiting``, off active: the holder lets go, its token is spent; a signal
    may resume it at any moment from then on), or ``cancelled`` (a cancel was requested
    while it ran: it ended cancelled instead of parking). Counts a delay, never an
    attempt. Refusals write nothing: ``StaleError``, ``GoneError``, ``StateError``
    (``wait not active``), ``KindError``. Round trips: a fenced check that reads the
    journal (all a replay needs), then the registration (with the store's read) and the
    park.
    """
    row, active, tok = held_keys(queue, job_id, token)
    step_name(name)
    value, index = _value(key), _index(key)
    timeout = "" if timeout_ms is None else str(guard.span("timeout_ms", timeout_ms, 1))
    keys = (row, active, keyspace.queue_key(queue, "waiting"))

    def call(mode: str, payload: bytes | str = "") -> Eval:
        return Eval("wait", keys, (job_id, tok, name, key, timeout, mode, payload))

    def calls() -> Verb[Recorded]:
        # the refusals first, writing nothing anywhere (nor a registration); a step
        # recorded before (a replay) is the answer
        found = yield call("check")
        if found is not None:
            return recorded(name, found)
        # registered BEFORE it parks: a waiter that dies between the two leaves an index
        # entry (harmless: a signal's resume finds no job) rather than a parked job no
        # signal can find
        stored = yield Eval("rendezvous", (index, value), (queue,))
        reply = yield (call("park") if stored is None else call("take", stored))
        return recorded(name, reply)

    return calls()


@verb
def signal(key: str, payload: bytes | str = b"null",
           ttl_ms: int = DEFAULT_SIGNAL_TTL_MS) -> Verb[int]:
    """Send signal ``key``: every job waiting for it, on any queue, gets ``payload`` as its
    step's result and goes back to pending at its priority (or its group's lane); the
    count resumed. The payload is kept ``ttl_ms`` (SERVER clock) for waits that begin
    later, which take it at once; a later signal replaces it.

    Not one transition: the store and the read of the key's queue index are one script
    in the key's slot, each queue's resume one script in the queue's slot, and the index
    entries the resumes covered are dropped last. A call that fails part way may be sent
    again: a resume is idempotent (a job resumes once) and the index is only trimmed
    after every resume landed.
    """
    guard.payload(payload)
    guard.span("ttl_ms", ttl_ms, 1)
    value, index = _value(key), _index(key)

    def calls() -> Verb[int]:
        got = yield Eval("signal", (value, index), (payload, str(ttl_ms)))
        now, queues = int(got[0]), [text(q) for q in got[1:]]
        resumed = 0
        if queues:
            for reply in (yield Batch(tuple(_resume(q, key, payload, ttl_ms)
                                            for q in queues))):
                if isinstance(reply, errors.ServerError):
                    raise reply
                resumed += int(reply)
        # entries registered before the store: the resumes above found their jobs parked,
        # or left their queues the copy their parks take; one registered at or after the
        # store read the payload itself
        yield Command(("ZREMRANGEBYSCORE", index, "-inf", f"({now}"))
        return resumed

    return calls()


@verb
def stored(key: str) -> Verb[bytes | None]:
    """The payload signal ``key`` keeps for late waiters, or ``None`` (never sent, or its
    TTL ran out on the SERVER clock)."""
    return single(Command(("GET", _value(key))), lambda r: r)
