"""Firing: plan a due entry on the host (``recurrence.plan``), fire it atomically on the
server (the ``fire`` script), and ``sweep`` a queue's due names (what the Pump runs).

Clocks: the registry is priced on the HOST clock by default; ``sweep(clock="server")``
reads the server's ``TIME`` once per sweep and plans every slot from it instead, so a
Pump host whose clock is off fires on the server's time (``App(recurrence_clock=
"server")``). A pause's end (``pause(until=)``) is always SERVER time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from echomq.core import errors, ids, keyspace
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.recurrence import Plan, jitter_offset, plan
from echomq.core.steps import Batch, Eval, Verb, single, text, verb
from echomq.verbs.jobs.reads import server_now_ms
from echomq.verbs.repeat.entries import entry_keys, now_ms
from echomq.verbs.repeat.seed import due_verb, rearm

# -- firing: plan on the host, fire atomically on the server -------------------------------


class Fired(NamedTuple):
    """The outcome of ``fire`` for one name.

    ``outcome`` is ``"fired"`` (``ids`` enqueued, in mint order), ``"skipped"`` (``reason``
    says why: ``raced`` another pump fired this due period or the definition changed since
    the read; ``overlap``; ``limit``; ``missed`` the catch-up policy skipped every slot;
    ``invalid`` the record cannot be planned; ``paused`` the registration is paused),
    ``"resumed"`` (a pause's end came: the registration runs again from its next slot) or
    ``"absent"`` (the record is gone; the dangling member was removed).
    """

    name: str
    outcome: Outcome
    reason: str
    ids: tuple[str, ...]
    #: a registration paused with an end: ms from the sweep's SERVER now until it resumes
    resume_in_ms: int | None = None


def fire_step(queue: str, entry: Mapping[str, Any], now: int) -> tuple[Eval, tuple[str, ...]]:
    """The ``fire`` call for a due ``entry`` at HOST ``now``, with the ids it would enqueue.

    An entry with no record (a dangling member) still gets a call, which removes it.
    """
    name = entry["name"]
    keys = (*entry_keys(queue, name), keyspace.queue_key(queue, "pending"))
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
        *occurrences(entry, zip(minted, p.slots, strict=True), now),
    )
    return Eval("fire", keys, args), minted


def occurrences(entry: Mapping[str, Any], slots: Any, now: int) -> list[str]:
    """The scripts' per-occurrence triples: id, run-at (``""``: claimable now; else the
    slot plus its jitter, when that is still ahead of ``now``), slot."""
    jitter = int(entry.get("jitter_ms") or 0)
    out: list[str] = []
    for job_id, slot in slots:
        run_at = slot + jitter_offset(str(entry["name"]), slot, jitter)
        out += [job_id, str(run_at) if run_at > now else "", str(slot)]
    return out


def _fired(name: str, minted: tuple[str, ...], reply: Any) -> Fired:
    kind, n = text(reply[0]), int(reply[1])
    if kind == "fired":
        if n:
            return Fired(name, Outcome.FIRED, "", tuple(text(i) for i in reply[2:2 + n]))
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


CLOCKS = ("host", "server")


@verb
def sweep(queue: str, now: int | None = None, batch: int | None = None,
          clock: str = "host") -> Verb[list[Fired]]:
    """Read the due registrations and fire each one (one pipelined round trip of ``fire``).

    What the Pump runs every tick. ``clock="host"`` (the default): ``now`` (default HOST
    now) selects the due names and prices their next runs. ``clock="server"``: the sweep
    reads the server's ``TIME`` once and does the same from it (``now`` must then be left
    out). ``batch`` bounds one sweep to the most overdue names (all of them by default).
    A record that cannot be planned (say its zone left the zone database) is reported
    ``skipped``/``invalid`` and left as it is. A paused registration is ``skipped``/
    ``paused`` (with ``resume_in_ms`` when its pause has an end), until that end has come
    on the SERVER clock: then this sweep resumes it (``resumed``) and fires it at once when
    it is due from now (an interval).
    """
    keyspace.validate_queue(queue)
    if clock not in CLOCKS:
        raise ValueError(f"clock must be 'host' or 'server', not {clock!r}")
    if clock == "server" and now is not None:
        raise ValueError("clock='server' reads the server's time: leave now out")
    given = None if now is None else guard.instant("now", now)
    if batch is not None:
        guard.positive("batch", batch)

    def steps() -> Verb[list[Fired]]:
        at = given if given is not None else now_ms()
        server: int | None = None
        if clock == "server":
            server = at = yield from server_now_ms.steps()
        entries = yield from due_verb(queue, at, batch)
        if server is None and any(e.get("paused") and e.paused_until is not None
                                  for e in entries):
            server = yield from server_now_ms.steps()
        calls: list[tuple[str, tuple[Eval, ...], tuple[str, ...]]] = []
        out: dict[str, Fired] = {}
        for entry in entries:
            name = entry["name"]
            if entry.get("paused"):  # the fire script refuses it too (a pause mid-sweep)
                until = entry.paused_until
                if until is None or server is None or until > server:
                    left = None if until is None or server is None else until - server
                    out[name] = Fired(name, Outcome.SKIPPED, "paused", (), left)
                    continue
                calls.append(_resuming(queue, entry, at, until))
                continue
            try:
                step, minted = fire_step(queue, entry, at)
            except (ValueError, TypeError):
                out[name] = Fired(name, Outcome.SKIPPED, "invalid", ())
                continue
            calls.append((name, (step,), minted))
        if calls:
            replies = yield Batch(tuple(step for _, group, _ in calls for step in group))
            i = 0
            for name, group, minted in calls:
                got = replies[i:i + len(group)]
                i += len(group)
                for reply in got:
                    if isinstance(reply, errors.ServerError):
                        raise reply
                if group[0].script == "repeat_hold":
                    out[name] = (_fired(name, minted, got[1]) if len(got) > 1
                                 and int(got[0]) == 1 else Fired(name, Outcome.RESUMED, "", ()))
                else:
                    out[name] = _fired(name, minted, got[0])
        return [out[e["name"]] for e in entries]

    return steps()


def _resuming(queue: str, entry: Mapping[str, Any], now: int, until: int
              ) -> tuple[str, tuple[Eval, ...], tuple[str, ...]]:
    """A paused registration whose pause's end has come: resume it (the script checks the
    end against SERVER now once more) and, when its first run from now is due, fire it in
    the same round trip."""
    name = entry["name"]
    at = rearm(entry, now, until)
    resume = Eval("repeat_hold", entry_keys(queue, name), (name, "resume_due",
                                                      "" if at is None else str(at)))
    if at is None or at > now:
        return name, (resume,), ()
    step, minted = fire_step(queue, {**entry, "next_at": at, "paused": False}, now)
    return name, (resume, step), minted
