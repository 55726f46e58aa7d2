"""The doctor: check a live queue's invariants, and repair what can be repaired.

The invariants are the ones the transitions keep (and the hypothesis model in
``tests/verbs/test_model.py`` asserts after every step):

- every job row is in exactly the set its state names (a pending grouped job: its group's
  lane) and in no other, and every index entry has a row (kinds ``missing``, ``stray``,
  ``no-row``); a row is a hash with a known state (``not-a-hash``, ``unknown-state``);
- a group's active count equals its jobs on active (``active-count``), and the ring holds
  exactly the ready groups (``ring``);
- a flow parent waiting for its children waits for at least one (``no-children``), only
  for its own (``foreign-dep``), and each one it waits for still exists or has its end on
  its queue's outbox (``child-gone``: report only; a parent admitted less than the
  admission grace ago is left out, its tree may still be being written).

How it reads, so it never stalls the server: the rows by ``SCAN`` (``MATCH`` on the queue's
job keys) and each set and lane by ``ZSCAN``/``SSCAN``, each round trip bounded by
``batch``; then the candidates are checked ``batch`` at a time by the ``doctor`` script, each
subject atomically (a job claimed between the scan and the check is checked as it is now,
so a live queue gives no false finding). The one read that grows with the queue is the
active set, read whole once per groups check (it holds the jobs in hand).

``check(conn, queue)`` reports; ``check(conn, queue, fix=True)`` also repairs each finding
in the same atomic step that confirmed it (``Finding.repaired`` says how), as the script's
header lists. Clock: SERVER (the repairs' scores). Both connectors, like every verb.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from echomq.core import guards as guard
from echomq.core import keyspace, readings
from echomq.core.steps import Batch, Command, Eval, Verb, scored, text, verb
from echomq.verbs.flows import ADMIT_GRACE_MS

#: the sets a job's state names (``core.states.SET_OF``'s values), read by ``ZSCAN``
SETS = ("pending", "schedule", "active", "dead", "cancelled", "expired", "completed",
        "waiting-children")
DEFAULT_BATCH = 200
_GLOB = re.compile(r"([*?\[\]\\])")
_ROW_KEY = re.compile(r"^emq:\{.*\}:job:(.+)$")


@dataclass(frozen=True, slots=True)
class Finding:
    """One invariant that does not hold: on ``queue``, for ``subject`` (a job id, a group
    name, a flow parent's id), of ``kind`` (see the module docstring), ``detail`` in words,
    and ``repaired``: what the repair did ('' when none ran or none exists)."""

    queue: str
    kind: str
    subject: str
    detail: str
    repaired: str = ""


def _glob(literal: str) -> str:
    """``literal`` with the glob characters a ``MATCH`` reads escaped."""
    return _GLOB.sub(r"\\\1", literal)


def _scan(args: tuple[Any, ...], cursor_at: int, route: str | None = None
          ) -> Verb[list[Any]]:
    """Every element a cursor command (``SCAN``/``ZSCAN``/``SSCAN``) returns, one bounded
    round trip at a time (``args[cursor_at]`` is the cursor)."""
    got: list[Any] = []
    cursor: Any = 0
    while True:
        call = (*args[:cursor_at], cursor, *args[cursor_at + 1:])
        reply = yield Command(call, route=route)
        cursor, items = reply
        if isinstance(cursor, dict):  # a cluster client keys a SCAN cursor by node
            cursor = next(iter(cursor.values()), 0)
        got.extend(items)
        if int(cursor) == 0:
            return got


def _zscan(key: str, batch: int) -> Verb[list[tuple[Any, Any]]]:
    """Every (member, score) of the sorted set ``key``, ``batch`` at a time."""
    return scored((yield from _scan(("ZSCAN", key, 0, "COUNT", batch), 2)))


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


@verb
def check(queue: str, fix: bool = False, batch: int = DEFAULT_BATCH) -> Verb[list[Finding]]:
    """The findings on ``queue`` (none: every invariant holds); with ``fix``, each is
    repaired where it is found. Every round trip is bounded by ``batch`` keys or subjects."""
    guard.positive("batch", batch)
    base = keyspace.base(queue)
    anchor = base + "pending"  # routes the keyless SCAN and the script to the queue's slot
    flag = "1" if fix else "0"

    def run(what: str, subjects: list[str]) -> Verb[list[Finding]]:
        reply = yield Eval("doctor", (anchor,), (base, flag, what, *subjects))
        return [Finding(queue, text(reply[i + 1]), text(reply[i]), text(reply[i + 2]),
                        text(reply[i + 3])) for i in range(0, len(reply), 4)]

    def calls() -> Verb[list[Finding]]:
        found: list[Finding] = []
        # -- what there is: rows, index entries, lanes, groups -------------------------
        lanes_of: dict[str, list[str]] = {}
        for key in (yield from _scan(("SCAN", 0, "MATCH", _glob(base) + "job:*", "COUNT",
                                      batch), 1, route=anchor)):
            m = _ROW_KEY.match(readings.text_of(key))
            if m:
                lanes_of.setdefault(m.group(1), [])
        groups = {text(g) for g in (yield from _scan(("SSCAN", base + "groups", 0, "COUNT",
                                                      batch), 2))}
        for key in (yield from _scan(("SCAN", 0, "MATCH", _glob(base) + "g:*:pending",
                                      "COUNT", batch), 1, route=anchor)):
            groups.add(readings.text_of(key)[len(base) + 2:-len(":pending")])
        for s in ("ring", "gwait"):
            groups.update(text(m) for m, _ in (yield from _zscan(base + s, batch)))
        for s in SETS:
            for m, _ in (yield from _zscan(base + s, batch)):
                lanes_of.setdefault(text(m), [])
        for g in sorted(groups):
            for m, _ in (yield from _zscan(keyspace.lane_key(queue, g), batch)):
                lanes_of.setdefault(text(m), []).append(g)
        # -- the checks, each subject atomically in the script ----------------------------
        pairs_ = [x for jid, lanes in lanes_of.items() for x in (jid, ",".join(lanes))]
        for part in _chunks(pairs_, 2 * batch):
            found += yield from run("jobs", part)
        for part in _chunks(sorted(groups), batch):
            found += yield from run("groups", part)
        parents = [(text(m), readings.score_ms(s))
                   for m, s in (yield from _zscan(base + "waiting-children", batch))]
        for part in _chunks([pid for pid, _ in parents], batch):
            found += yield from run("parents", part)
        found += yield from _children_gone(queue, parents, batch)
        return found

    return calls()


def _children_gone(queue: str, parents: list[tuple[str, int]], batch: int
                   ) -> Verb[list[Finding]]:
    """Parents that wait for a child whose row is gone with no end on its queue's outbox:
    no carry will ever settle it (report only: how it ended is not known). A child may live
    on another shard, so this is read key by key, not in the script; parents admitted less
    than ``ADMIT_GRACE_MS`` ago are left out (their tree may still be being written)."""
    secs, micros = yield Command(("TIME",))
    now = int(secs) * 1000 + int(micros) // 1000
    old = [pid for pid, since in parents if now - since > ADMIT_GRACE_MS]
    out: list[Finding] = []
    for part in _chunks(old, batch):
        deps = yield Batch(tuple(
            Command(("SMEMBERS", keyspace.queue_key(queue, f"deps:{pid}"))) for pid in part))
        for pid, members in zip(part, deps, strict=True):
            if isinstance(members, Exception):
                continue
            kids = [readings.text_of(k) for k in members]
            for kid_part in _chunks(kids, batch):
                exists = yield Batch(tuple(Command(("EXISTS", k)) for k in kid_part))
                gone = [k for k, n in zip(kid_part, exists, strict=True)
                        if not isinstance(n, Exception) and not int(n)]
                for kid in gone:
                    if "}:job:" not in kid:
                        continue  # not a row key: the script's foreign-dep check names it
                    kq = kid[: kid.index("}:job:") + 2]
                    pending = yield Command(("XLEN", kq + "flow:outbox"))
                    if not int(pending):
                        out.append(Finding(queue, "child-gone", pid,
                                           f"waits for {kid}, whose row is gone with no end "
                                           "on its queue's outbox"))
    return out
