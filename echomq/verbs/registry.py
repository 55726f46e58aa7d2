"""The registry of queue names: one set, ``emq:queues``, so a tool can find a job's queue
without scanning the keyspace.

Why a separate key and a separate verb: every key of a queue lives under that queue's hash
tag, and the registry cannot (it names every queue), so on Valkey Cluster no queue's script
may write it. Instead the writers add a name with one cheap ``SADD`` the first time a
process uses a queue (``note``: enqueue through an ``App``, the CLI's enqueue, a worker's
start), remembered in the connector's own memory (``conn.memory.registered``, see
``connectors.memory``) so the hot path pays nothing after that; this module keeps none.
A queue written only through the low-level verbs is not registered; ``queues(scan=True)``
finds it anyway by scanning for its sorted sets, the slow path the CLI takes only when the
registry misses.

Reads: ``names`` (the registry), ``queues`` (registry, plus discovered with ``scan``),
``locate`` (which of some queues holds a job row: one pipelined round trip). No clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, drive, single, text, verb
from echomq.verbs import discovery

KEY = keyspace.registry_key()


@verb
def add(queues: Sequence[str]) -> Verb[int]:
    """Register queue names (``SADD emq:queues``); how many were new."""
    names = [keyspace.validate_queue(q) for q in queues]
    if not names:
        raise ValueError("add needs at least one queue name")
    return single(Command(("SADD", KEY, *names)), int)


@verb
def names() -> Verb[list[str]]:
    """The registered queue names, sorted."""
    return single(Command(("SMEMBERS", KEY)), lambda reply: sorted(text(m) for m in reply))


@verb
def queues(scan: bool = True, declared: Sequence[str] = (), budget: int = discovery.SCAN_BUDGET,
           progress: Callable[[int, int], None] | None = None) -> Verb[list[str]]:
    """Every queue known: registered, ``declared`` (e.g. an app's queues, even empty ones)
    and, with ``scan``, discovered by scanning for EchoMQ sorted sets on every primary
    (``discovery.queues``, O(keyspace): for listings, not per-call lookups). Sorted."""
    found = {keyspace.validate_queue(q) for q in declared}

    def calls() -> Verb[list[str]]:
        found.update(text(m) for m in (yield Command(("SMEMBERS", KEY))))
        if scan:
            found.update((yield from discovery.queues.steps(budget, progress)))
        return sorted(found)

    return calls()


@verb
def find(job_id: str, first: Sequence[str] = ()) -> Verb[str | None]:
    """The queue holding ``job_id``'s row or kept result among ``first`` (e.g. an app's
    queues) and every registered queue: where ``app.job`` looks when given no queue. Two
    round trips (the registry, then one pipelined ``EXISTS`` per queue), or ``None``."""
    head = [keyspace.validate_queue(q) for q in first]

    def calls() -> Verb[str | None]:
        registered = sorted(text(m) for m in (yield Command(("SMEMBERS", KEY))))
        found: str | None = yield from locate.steps(job_id,
                                                    dict.fromkeys([*head, *registered]))
        return found

    return calls()


@verb
def locate(job_id: str, among: Iterable[str]) -> Verb[str | None]:
    """The first queue of ``among`` holding a row or a kept result for ``job_id`` (one
    pipelined round trip of ``EXISTS``: an ack that deleted the row may have kept the
    result, and ``app.job`` still reports such a job), or ``None``."""
    candidates = list(among)
    keys = tuple((keyspace.job_key(q, job_id), keyspace.queue_key(q, f"result:{job_id}"))
                 for q in candidates)

    def calls() -> Verb[str | None]:
        if not keys:
            return None
        replies = yield Batch(tuple(Command(("EXISTS", *pair)) for pair in keys))
        return next((q for q, n in zip(candidates, replies, strict=True)
                     if not isinstance(n, Exception) and int(n)), None)

    return calls()


def _registered(conn: Any) -> set[str]:
    """The names ``conn`` remembers registering; a connector without a memory (one of a
    caller's own) remembers none, so each ``note`` sends its (idempotent) ``SADD``."""
    memory = getattr(conn, "memory", None)
    return memory.registered if memory is not None else set()


def noting(conn: Any, queue: str) -> Verb[None]:
    """The steps that register ``queue`` once per connector, sync or async (``note`` and
    ``anote`` drive them; an admission runs them inside its own steps). The name counts as
    noted from the moment its ``SADD`` is sent: a burst of first enqueues (a web app's
    first requests) sends one, not one per caller, each on a connection of its own; a
    failed one is forgotten so the next call sends it again."""
    seen = _registered(conn)
    if queue in seen:
        return
    seen.add(queue)
    try:
        yield from add.steps([queue])
    except BaseException:
        seen.discard(queue)
        raise


def note(conn: Any, queue: str) -> None:
    """Register ``queue`` once per (sync) connector: the first call sends ``SADD``, later
    ones nothing."""
    drive(conn, noting(conn, queue))


def noted(conn: Any, queue: str) -> bool:
    """True once ``queue`` is noted on ``conn`` (its ``SADD`` sent): a later ``note`` or
    ``anote`` would send nothing."""
    return queue in _registered(conn)


async def anote(conn: Any, queue: str) -> None:
    """``note`` on an ``AsyncConnector``."""
    await drive(conn, noting(conn, queue))  # type: ignore[misc]  # an awaitable on async


def forget(conn: Any) -> None:
    """Forget which queues ``conn`` noted: the server's registry was wiped (a test's
    ``FLUSHDB``), so the next admission on each queue registers it again."""
    _registered(conn).clear()
