"""A hypothesis state machine over the job transitions, against a real Valkey.

Random sequences of admission (priorities, groups, unique keys, now / in / at), promote,
claim, ack, retry, delay, reap, cancel, finish_cancelled, rate_limited, queue pause/resume,
group pause/resume, set_limit and set_rate. After every step the whole queue is read back
and these must hold:

- no job lost or duplicated: every admitted id sits on exactly one of pending, a lane,
  active, schedule, dead, cancelled, completed, and that one matches its row's state;
- no ghost: every member of those sets is an admitted id with a row;
- a group's active count equals its jobs on active, and a claim never takes a group over a
  limit it was under, nor starts more of its jobs than its rate window has room for;
- the ring holds a group iff it is ready (jobs waiting, not paused, under its limit, not
  blocked on gwait), each group once;
- unique keys: a key exists iff a waiting or running job owns it, and names that job.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import valkey
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from echomq import Connector
from echomq.core import ids, keyspace
from echomq.verbs import groups, jobs

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

GROUPS = ["ga", "gb", "gc"]
UNIQUE = ["u1", "u2"]
LIVE = {"pending", "scheduled", "active"}
FAR = 4 * 10**12


class Model(RuleBasedStateMachine):
    url: str = ""
    wire: int = 4

    @initialize()
    def setup(self) -> None:
        self.q = "m" + uuid.uuid4().hex[:12]
        self.conn = Connector.connect(self.url, wire=self.wire)
        self.raw = valkey.Valkey.from_url(self.url)
        self.known: set[str] = set()
        self.held: dict[str, int] = {}
        self.limits: dict[str, int] = {}
        self.rates: dict[str, int] = {}  # a group's rate_max (per 600 s: time stands still)
        self.logged = dict.fromkeys(GROUPS, 0)  # its starts in the current window

    def teardown(self) -> None:
        if hasattr(self, "conn"):
            self.conn.close()
            self.raw.close()

    def k(self, suffix: str) -> str:
        return keyspace.queue_key(self.q, suffix)

    # -- rules ------------------------------------------------------------------------

    @rule(mode=st.sampled_from(["now", "now", "in", "at_past", "at_future"]),
          priority=st.sampled_from([0, 0, 1, 5]),
          group=st.sampled_from([None, *GROUPS]),
          unique=st.sampled_from([None, None, None, *UNIQUE]))
    def admit(self, mode: str, priority: int, group: str | None, unique: str | None) -> None:
        jid = ids.mint()
        value = {"now": 0, "in": 3_600_000, "at_past": 0, "at_future": FAR}[mode]
        got = jobs.admit(self.conn, self.q, jid, b"p", mode=mode.split("_")[0], value=value,
                         priority=priority, group=group, unique=unique)
        if got.outcome == "duplicate":
            assert unique is not None and got.id in self.known and got.id != jid
        else:
            assert got.id == jid
            self.known.add(jid)

    @rule(n=st.integers(1, 4))
    def enqueue_many(self, n: int) -> None:
        items = [(ids.mint(), b"p", {"group": GROUPS[i % 3], "priority": i % 2})
                 for i in range(n)]
        assert jobs.enqueue_many(self.conn, self.q, items) == ["enqueued"] * n
        self.known.update(i[0] for i in items)

    @rule(g=st.sampled_from(GROUPS))
    def burst(self, g: str) -> None:
        # a tenant's burst: three jobs at once, then a wide claim (rates and limits bind)
        items = [(ids.mint(), b"p", {"group": g}) for _ in range(3)]
        jobs.enqueue_many(self.conn, self.q, items)
        self.known.update(i[0] for i in items)
        self.claim(6)

    @rule()
    def promote(self) -> None:
        jobs.promote(self.conn, self.q, 50, native=False)

    @rule(n=st.integers(1, 5))
    def claim(self, n: int) -> None:
        before = self.group_active()
        got = jobs.claim_many(self.conn, self.q, 600_000, n)
        assert len({c.id for c in got}) == len(got)
        after = self.group_active()
        for g, limit in self.limits.items():
            if before.get(g, 0) <= limit:
                assert after.get(g, 0) <= limit, (g, before, after, limit)
        per_group = dict.fromkeys(GROUPS, 0)
        for c in got:
            assert c.id in self.known
            self.held[c.id] = c.token
            g = self.raw.hget(keyspace.job_key(self.q, c.id), "group")
            if g:
                per_group[g.decode()] += 1
        for g, n_started in per_group.items():
            if g in self.rates:
                # no claim exceeds the window: at most max starts in it, ever
                assert n_started <= max(0, self.rates[g] - self.logged[g]), (g, n_started)
                self.logged[g] += n_started

    def pick(self, data: Any) -> tuple[str, int]:
        jid = data.draw(st.sampled_from(sorted(self.held)))
        return jid, self.held.pop(jid)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def ack(self, data: Any) -> None:
        jid, token = self.pick(data)
        jobs.ack(self.conn, self.q, jid, token)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), max_attempts=st.integers(1, 3), delay=st.sampled_from([0, 600_000]))
    def retry(self, data: Any, max_attempts: int, delay: int) -> None:
        jid, token = self.pick(data)
        out = jobs.retry(self.conn, self.q, jid, token, delay, max_attempts, "e")
        assert out in ("retrying", "dead", "cancelled")

    @precondition(lambda self: self.held)
    @rule(data=st.data(), delay=st.sampled_from([0, 600_000]))
    def delay(self, data: Any, delay: int) -> None:
        jid, token = self.pick(data)
        jobs.delay(self.conn, self.q, jid, token, delay)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def reap(self, data: Any) -> None:
        jid, _ = self.pick(data)
        self.raw.zadd(self.k("active"), {jid: 1})  # its lease lapses
        assert jobs.reap(self.conn, self.q, 50, max_stalled=1) == 1

    @precondition(lambda self: self.known)
    @rule(data=st.data())
    def cancel(self, data: Any) -> None:
        jid = data.draw(st.sampled_from(sorted(self.known)))
        state = self.raw.hget(keyspace.job_key(self.q, jid), "state").decode()
        out = jobs.cancel(self.conn, self.q, jid)
        expect = {"pending": "cancelled", "scheduled": "cancelled", "active": "requested"}
        assert out == expect.get(state, "absent"), (state, out)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def checkpoint_then_finish(self, data: Any) -> None:
        jid = data.draw(st.sampled_from(sorted(self.held)))
        cp = jobs.checkpoint(self.conn, self.q, jid, self.held[jid], 600_000)
        if cp.cancelled:
            jobs.finish_cancelled(self.conn, self.q, jid, self.held.pop(jid))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def rate_limited(self, data: Any) -> None:
        jid, token = self.pick(data)
        jobs.rate_limited(self.conn, self.q, jid, token, 1)

    @rule(on=st.sampled_from([True, False, False]))
    def pause_queue(self, on: bool) -> None:
        (jobs.pause if on else jobs.resume)(self.conn, self.q)

    @rule(g=st.sampled_from(GROUPS), on=st.sampled_from([True, False, False]))
    def pause_group(self, g: str, on: bool) -> None:
        (groups.pause if on else groups.resume)(self.conn, self.q, g)

    @rule(g=st.sampled_from(GROUPS), limit=st.sampled_from([None, None, 1, 3]))
    def set_limit(self, g: str, limit: int | None) -> None:
        groups.set_limit(self.conn, self.q, g, limit)
        if limit is None:
            self.limits.pop(g, None)
        else:
            self.limits[g] = limit

    @rule(g=st.sampled_from(GROUPS), binding=st.sampled_from([True, True, False]),
          clear=st.sampled_from([False, False, True]))
    def set_rate(self, g: str, binding: bool, clear: bool) -> None:
        if clear:
            groups.clear_rate(self.conn, self.q, g)
            self.rates.pop(g, None)
            self.logged[g] = 0
        else:
            groups.set_rate(self.conn, self.q, g, 2 if binding else 1000, 600_000)
            self.rates[g] = 2 if binding else 1000

    @rule()
    def reopen_blocked(self) -> None:
        # time passes for every block: the windows and rate_limited blocks reopen
        for g in self.raw.zrange(self.k("gwait"), 0, -1):
            self.raw.zadd(self.k("gwait"), {g: 1})
            log = keyspace.group_key(self.q, g.decode()) + ":starts"
            self.raw.delete(log, log + ":n")
            self.logged[g.decode()] = 0

    # -- invariants -------------------------------------------------------------------

    def group_active(self) -> dict[str, int]:
        return {g: int(self.raw.hget(keyspace.group_key(self.q, g), "active") or 0)
                for g in GROUPS}

    @invariant()
    def every_job_in_exactly_one_place(self) -> None:
        if not hasattr(self, "q"):
            return
        sets = {s: {m.decode() for m in self.raw.zrange(self.k(s), 0, -1)}
                for s in ("pending", "active", "schedule", "dead", "cancelled", "completed")}
        lanes = {g: {m.decode() for m in self.raw.zrange(keyspace.lane_key(self.q, g), 0, -1)}
                 for g in GROUPS}
        home = {"pending": "pending", "scheduled": "schedule", "active": "active",
                "dead": "dead", "cancelled": "cancelled", "completed": "completed"}
        members = [m for s in (*sets.values(), *lanes.values()) for m in s]
        assert len(members) == len(set(members)) == len(self.known), "lost or duplicated"
        assert set(members) == self.known, "a ghost or a lost job"
        active_of = dict.fromkeys(GROUPS, 0)
        for jid in self.known:
            row = self.raw.hmget(keyspace.job_key(self.q, jid), "state", "group", "unique")
            state, group = row[0].decode(), row[1].decode() if row[1] else None
            if state == "pending" and group:
                assert jid in lanes[group], (jid, state, group)
            else:
                assert jid in sets[home[state]], (jid, state)
            if state == "active" and group:
                active_of[group] += 1
        assert self.group_active() == active_of

    @invariant()
    def the_ring_holds_exactly_the_ready_groups(self) -> None:
        if not hasattr(self, "q"):
            return
        ring = [m.decode() for m in self.raw.zrange(self.k("ring"), 0, -1)]
        assert len(ring) == len(set(ring))
        gwait = {m.decode() for m in self.raw.zrange(self.k("gwait"), 0, -1)}
        for g in GROUPS:
            active, limit, paused = self.raw.hmget(keyspace.group_key(self.q, g),
                                                  "active", "limit", "paused")
            ready = (self.raw.zcard(keyspace.lane_key(self.q, g)) > 0 and paused is None
                     and (limit is None or int(active or 0) < int(limit)) and g not in gwait)
            assert (g in ring) == ready, (g, ring, active, limit, paused, gwait)

    @invariant()
    def unique_keys_name_a_live_owner(self) -> None:
        if not hasattr(self, "q"):
            return
        for key in UNIQUE:
            owner = self.raw.get(self.k(f"unique:{key}"))
            live = [j for j in self.known
                    if self.raw.hget(keyspace.job_key(self.q, j), "unique") == key.encode()
                    and self.raw.hget(keyspace.job_key(self.q, j), "state").decode() in LIVE]
            assert len(live) <= 1, live
            if live:
                assert owner == live[0].encode()
            else:
                assert owner is None, (key, owner)


@pytest.mark.parametrize("wire", [4, 6])
def test_the_model_holds(url: str, wire: int) -> None:
    from echomq import native

    if wire == 6 and not native.available():
        pytest.skip("the native module is not built")  # pragma: no cover

    class Machine(Model):
        pass

    Machine.url, Machine.wire = url, wire
    run_state_machine_as_test(Machine, settings=settings(
        max_examples=50 if wire == 4 else 25, stateful_step_count=40, deadline=None,
        suppress_health_check=list(HealthCheck)))
