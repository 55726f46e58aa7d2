"""Firing: plan a due entry on the host (``recurrence.plan``), fire it atomically on the
server (the ``fire`` script), and ``sweep`` a queue's due names (what the Pump runs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from echomq.core import errors, ids, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.recurrence import Plan, plan
from echomq.core.steps import Batch, Eval, Verb, single, text, verb
from echomq.verbs.repeat.entries import _keys, now_ms
from echomq.verbs.repeat.seed import due_verb

# -- firing: plan on the host, fire atomically on the server -------------------------------


class Fired(NamedTuple):
    """The outcome of ``fire`` for one name.

    ``outcome`` is ``"fired"`` (``ids`` enqueued, in mint order), ``"skipped"`` (``reason``
    says why: ``raced`` another pump fired this due period or the definition changed since
    the read; ``overlap``; ``limit``; ``missed`` the catch-up policy skipped every slot;
    ``invalid`` the record cannot be planned; ``paused`` the registration is paused) or
    ``"absent"`` (the record is gone; the dangling member was removed).
    """

    name: str
    outcome: Outcome
    reason: str
    ids: tuple[str, ...]


def fire_step(queue: str, entry: Mapping[str, Any], now: int) -> tuple[Eval, tuple[str, ...]]:
    """The ``fire`` call for a due ``entry`` at HOST ``now``, with the ids it would enqueue.

    An entry with no record (a dangling member) still gets a call, which removes it.
    """
    name = entry["name"]
    keys = (*_keys(queue, name), keyspace.queue_key(queue, "pending"))
    # a dangling member (no record) still gets a call: the script removes it
    p = plan(entry, now) if entry.get("every_ms") or entry.get("cron") else Plan((), None)
    minted = tuple(ids.mint() for _ in p.slots)
    last_at = p.slots[-1] if p.slots else entry["next_at"]
    args = (
        name,
        str(entry["next_at"]),
        keyspace.base(queue),
        "" if p.next_at is None else str(p.next_at),
        str(last_at),
        *minted,
    )
    return Eval("fire", keys, args), minted


def _fired(name: str, minted: tuple[str, ...], reply: Any) -> Fired:
    kind, n = text(reply[0]), int(reply[1])
    if kind == "fired":
        if n:
            return Fired(name, Outcome.FIRED, "", minted[:n])
        return Fired(name, Outcome.SKIPPED, "missed", ())
    if kind == "absent":
        return Fired(name, Outcome.ABSENT, "", ())
    return Fired(name, Outcome.SKIPPED, kind, ())


@verb
def fire(queue: str, entry: Mapping[str, Any], now: int | None = None) -> Verb[Fired]:
    """Fire one due ``entry`` (as ``due`` returned it) atomically; see ``Fired``.

    HOST clock: ``now`` (default HOST now) prices the next run and mints the ids. The
    script enqueues only if the name's score is still ``entry["next_at"]``, so a second
    caller with the same entry gets ``skipped``/``raced`` and writes nothing.
    """
    at = now_ms() if now is None else guard.instant("now", now)
    step, minted = fire_step(queue, entry, at)
    return single(step, lambda r: _fired(entry["name"], minted, r))


@verb
def sweep(queue: str, now: int | None = None, batch: int | None = None) -> Verb[list[Fired]]:
    """Read the due registrations and fire each one (one pipelined round trip of ``fire``).

    What the Pump runs every tick. HOST clock: ``now`` (default HOST now) selects the due
    names and prices their next runs. ``batch`` bounds one sweep to the most overdue names
    (all of them by default). A record that cannot be planned (say its zone left the zone
    database) is reported ``skipped``/``invalid`` and left as it is.
    """
    keyspace.validate_queue(queue)
    at = now_ms() if now is None else guard.instant("now", now)
    if batch is not None:
        guard.positive("batch", batch)

    def steps() -> Verb[list[Fired]]:
        entries = yield from due_verb(queue, at, batch)
        calls: list[tuple[str, Eval, tuple[str, ...]]] = []
        out: dict[str, Fired] = {}
        for entry in entries:
            if entry.get("paused"):  # the fire script refuses it too (a pause mid-sweep)
                out[entry["name"]] = Fired(entry["name"], Outcome.SKIPPED, "paused", ())
                continue
            try:
                step, minted = fire_step(queue, entry, at)
            except (ValueError, TypeError):
                out[entry["name"]] = Fired(entry["name"], Outcome.SKIPPED, "invalid", ())
                continue
            calls.append((entry["name"], step, minted))
        if calls:
            replies = yield Batch(tuple(step for _, step, _ in calls))
            for (name, _, minted), reply in zip(calls, replies, strict=True):
                if isinstance(reply, errors.ServerError):
                    raise reply
                out[name] = _fired(name, minted, reply)
        return [out[e["name"]] for e in entries]

    return steps()
