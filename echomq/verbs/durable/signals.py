"""Durable waits and signals: a job parks on a signal key; a signal resumes every waiter.

The waiter's side is ``wait_for`` (park, then register, then re-check the store), the
sender's ``signal`` (store, then read the index, then resume queue by queue); the package
docstring (``echomq.verbs.durable``) says why one side always sees the other.
"""

from __future__ import annotations

from echomq.core import errors, keyspace
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Eval, Verb, single, text, verb
from echomq.verbs.durable.journal import Recorded, StepState, held_keys, recorded, step_name

#: how long a signal is kept for waiters that park after it was sent (``App(signal_ttl=)``)
DEFAULT_SIGNAL_TTL_MS = 86_400_000


def _value(key: str) -> str:
    return keyspace.signal_key(key, "value")


def _index(key: str) -> str:
    return keyspace.signal_key(key, "queues")


def _resume(queue: str, key: str, payload: bytes | str) -> Eval:
    return Eval("resume", (keyspace.waiters_key(queue, key), keyspace.queue_key(queue, "waiting")),
                (keyspace.base(queue), key, payload))


@verb
def wait_for(queue: str, job_id: str, token: int, name: str, key: str,
             timeout_ms: int | None = None) -> Verb[Recorded]:
    """Wait step ``name`` of the job in hand for signal ``key``, fenced by ``token``.

    Timeout: ``timeout_ms`` from SERVER now (``None``: none). The answer's step is
    ``done`` with the signal's payload as its result (a signal was stored: taken at once,
    the job stays in hand; or the step was done before), ``timed_out`` (recorded before:
    the handler raises ``errors.SignalTimeout``), or ``waiting``: the job is parked
    (``state = waiting``, off active: the holder lets go, its token is spent). A waiting
    answer may already be resumed: a signal sent while it parked is found by the re-check
    and the job is back on pending by the time this returns. Counts a delay, never an
    attempt. Refusals write nothing: ``StaleError``, ``GoneError``, ``StateError`` (``wait
    not active``), ``KindError``. Round trips: the store's read and the park (2), then the
    registration (and, when it finds the signal, the resume) for a parked job.
    """
    row, active, tok = held_keys(queue, job_id, token)
    step_name(name)
    value, index = _value(key), _index(key)
    timeout = "" if timeout_ms is None else str(guard.span("timeout_ms", timeout_ms, 1))
    keys = (row, active, keyspace.queue_key(queue, "waiting"))

    def calls() -> Verb[Recorded]:
        stored = yield Command(("GET", value))
        mode, payload = ("park", "") if stored is None else ("take", stored)
        got = recorded(name, (yield Eval("wait", keys, (job_id, tok, name, key, timeout, mode,
                                                         payload))))
        if got.step.state is not StepState.WAITING:
            return got
        late = yield Eval("rendezvous", (index, value), (queue,))
        if late is not None:
            # the signal was stored after the first read: this waiter resumes itself
            yield _resume(queue, key, late)
        return got

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
            for reply in (yield Batch(tuple(_resume(q, key, payload) for q in queues))):
                if isinstance(reply, errors.ServerError):
                    raise reply
                resumed += int(reply)
        # entries registered before the store: their waiters were parked before it, so the
        # resumes above found them; one registered at or after it saw the stored payload
        yield Command(("ZREMRANGEBYSCORE", index, "-inf", f"({now}"))
        return resumed

    return calls()


@verb
def stored(key: str) -> Verb[bytes | None]:
    """The payload signal ``key`` keeps for late waiters, or ``None`` (never sent, or its
    TTL ran out on the SERVER clock)."""
    return single(Command(("GET", _value(key))), lambda r: r)
