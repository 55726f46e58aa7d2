"""Recurrence you can steer (DESIGN §3c): overlap policies (Temporal's meanings), jitter,
trigger, backfill, exclusions, pause until; key by key on both connectors and wires, on a
single server and a cluster."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from echomq.core import keyspace
from echomq.core.outcomes import Outcome
from echomq.core.recurrence import jitter_offset, plan
from echomq.verbs import jobs, repeat
from tests.support.clients import server_ms

pytestmark = pytest.mark.topologies

EVERY = 60_000


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def state(raw, queue, jid) -> str | None:
    got = raw.hget(keyspace.job_key(queue, jid), "state")
    return None if got is None else got.decode()


def fire_next(run, queue, name="r") -> repeat.Fired:
    """Fire the registration's next slot, as a Pump on time would (HOST ms = its score)."""
    entry = run(repeat.get, queue, name)
    return run(repeat.fire, queue, entry, entry.next_at)


def register(run, queue, overlap="allow", **more) -> None:
    assert run(repeat.upsert, queue, "r", template=b"tpl", every_ms=EVERY, overlap=overlap,
               **more) == Outcome.REGISTERED


# -- overlap ------------------------------------------------------------------------------

def test_allow_starts_every_slot(run, raw, queue):
    register(run, queue)
    a = fire_next(run, queue).ids
    b = fire_next(run, queue).ids
    assert len(a) == len(b) == 1
    assert {state(raw, queue, a[0]), state(raw, queue, b[0])} == {"pending"}


def test_skip_passes_a_slot_while_the_last_one_is_live(run, raw, queue):
    register(run, queue, "skip")
    (a,) = fire_next(run, queue).ids
    got = fire_next(run, queue)
    assert got.outcome == Outcome.SKIPPED and got.reason == "overlap"
    c = run(jobs.claim, queue, 60_000)
    run(jobs.ack, queue, a, c.token)
    assert fire_next(run, queue).outcome == Outcome.FIRED


def test_buffer_one_holds_one_and_releases_it_when_the_live_one_ends(run, raw, queue):
    register(run, queue, "buffer_one")
    (a,) = fire_next(run, queue).ids
    c = run(jobs.claim, queue, 60_000)
    (b,) = fire_next(run, queue).ids
    assert state(raw, queue, b) == "scheduled"
    assert raw.hget(keyspace.job_key(queue, b), "after") == a.encode()
    held = run(jobs.why, queue, b)
    assert held.control == "after" and a in held.words
    third = fire_next(run, queue)  # one already held: passed over
    assert third.outcome == Outcome.SKIPPED and third.reason == "overlap"
    run(jobs.ack, queue, a, c.token)  # the live one ends: the held one is due now
    assert raw.hget(keyspace.job_key(queue, b), "after") is None
    assert run(jobs.promote, queue, 10) == 1
    assert run(jobs.claim, queue, 60_000).id == b


def test_buffer_all_runs_them_one_after_another(run, raw, queue):
    register(run, queue, "buffer_all")
    (a,) = fire_next(run, queue).ids
    c = run(jobs.claim, queue, 60_000)
    (b,) = fire_next(run, queue).ids
    (d,) = fire_next(run, queue).ids
    assert raw.hget(keyspace.job_key(queue, d), "after") == b.encode()
    run(jobs.retry, queue, a, c.token, 0, 1, "boom")  # a dead end ends it too
    assert run(jobs.promote, queue, 10) == 1
    cb = run(jobs.claim, queue, 60_000)
    assert cb.id == b and state(raw, queue, d) == "scheduled"
    assert run(jobs.claim, queue, 60_000) is None
    run(jobs.ack, queue, b, cb.token)
    assert run(jobs.promote, queue, 10) == 1
    assert run(jobs.claim, queue, 60_000).id == d


def test_cancel_other_cancels_a_waiting_one_at_once(run, raw, queue):
    register(run, queue, "cancel_other")
    (a,) = fire_next(run, queue).ids
    (b,) = fire_next(run, queue).ids
    assert state(raw, queue, a) == "cancelled" and state(raw, queue, b) == "pending"


def test_cancel_other_stops_a_running_one_then_starts(run, raw, queue):
    register(run, queue, "cancel_other")
    (a,) = fire_next(run, queue).ids
    c = run(jobs.claim, queue, 60_000)
    (b,) = fire_next(run, queue).ids
    assert run(jobs.checkpoint, queue, a, c.token, 60_000).cancelled  # asked to stop
    assert state(raw, queue, b) == "scheduled"  # held until it has ended
    run(jobs.finish_cancelled, queue, a, c.token)
    assert run(jobs.promote, queue, 10) == 1
    assert run(jobs.claim, queue, 60_000).id == b


def test_a_held_occurrence_whose_live_one_was_deleted_is_released(run, raw, queue):
    register(run, queue, "buffer_all")
    (a,) = fire_next(run, queue).ids
    run(jobs.claim, queue, 60_000)
    (b,) = fire_next(run, queue).ids
    raw.delete(keyspace.job_key(queue, a))  # gone without an end (an operator's delete)
    fire_next(run, queue)  # the next fire finds it stranded and makes it due
    assert raw.hget(keyspace.job_key(queue, b), "after") is None
    assert run(jobs.promote, queue, 10) >= 1


# -- jitter -------------------------------------------------------------------------------

def test_jitter_moves_each_run_at_by_a_deterministic_offset(run, raw, queue):
    register(run, queue, jitter_ms=30_000)
    for _ in range(3):
        entry = run(repeat.get, queue, "r")
        slot = entry.next_at
        (jid,) = run(repeat.fire, queue, entry, slot).ids
        off = jitter_offset("r", slot, 30_000)
        assert 0 <= off < 30_000
        if off:
            assert int(raw.zscore(k(queue, "schedule"), jid)) == slot + off
        else:
            assert state(raw, queue, jid) == "pending"
    # the preview shows the same run-ats
    entry = run(repeat.get, queue, "r")
    (first, *_) = repeat.preview(entry, 3)
    assert first.run_at == first.slot + jitter_offset("r", first.slot, 30_000)


def test_two_racing_sweeps_fire_each_jittered_period_once(run, raw, queue):
    register(run, queue, jitter_ms=EVERY)
    for _ in range(5):
        entry = run(repeat.get, queue, "r")
        # two Pumps read the same due entry and fire it: one wins, the other is raced
        a = run(repeat.fire, queue, entry, entry.next_at)
        b = run(repeat.fire, queue, entry, entry.next_at)
        assert sorted((a.outcome, b.reason)) == [Outcome.FIRED, "raced"]
    counts = run(jobs.counts, queue)
    assert counts["pending"] + counts["scheduled"] == 5
    assert raw.zcard(k(queue, "repeat:r:slots")) == 5


# -- trigger and backfill -----------------------------------------------------------------

def test_trigger_runs_one_now_and_keeps_the_schedule(run, raw, queue):
    register(run, queue)
    before = run(repeat.get, queue, "r")
    jid = run(repeat.trigger, queue, "r")
    assert state(raw, queue, jid) == "pending"
    assert raw.hget(keyspace.job_key(queue, jid), "payload") == b"tpl"
    after = run(repeat.get, queue, "r")
    assert (after.next_at, after.fired) == (before.next_at, before.fired)
    with pytest.raises(LookupError):
        run(repeat.trigger, queue, "nope")


def test_backfill_fires_each_slot_once(run, raw, queue):
    register(run, queue)
    entry = run(repeat.get, queue, "r")
    start = entry.next_at - 5 * EVERY
    got = run(repeat.backfill, queue, "r", start, entry.next_at)
    assert len(got) == 5 and all(state(raw, queue, j) == "pending" for j in got)
    assert run(repeat.backfill, queue, "r", start, entry.next_at) == []  # twice: once
    # an overlapping wider range fires only the new slots; the Pump's own slot counts too
    fire_next(run, queue)
    wider = run(repeat.backfill, queue, "r", start - 2 * EVERY, entry.next_at + EVERY)
    assert len(wider) == 2
    with pytest.raises(ValueError):
        run(repeat.backfill, queue, "r", 0, entry.next_at)  # far more than MAX_BACKFILL
    with pytest.raises(LookupError):
        run(repeat.backfill, queue, "nope", start, entry.next_at)


def test_backfill_of_a_cron_range_leaves_excluded_days_out(run, queue):
    assert run(repeat.upsert, queue, "daily", template=b"d", cron="0 9 * * *",
               tz="Europe/Paris", exclude=[dt.date(2025, 12, 25)]) == Outcome.REGISTERED
    paris = dt.timezone(dt.timedelta(hours=1))
    got = run(repeat.backfill, queue, "daily", dt.datetime(2025, 12, 23, tzinfo=paris),
              dt.datetime(2025, 12, 28, tzinfo=paris))
    assert len(got) == 4  # the 23rd, 24th, 26th, 27th at 09:00 Paris


# -- exclusions ---------------------------------------------------------------------------

def test_excluded_slots_do_not_fire(run, raw, queue):
    assert run(repeat.upsert, queue, "d", template=b"d", cron="0 9 * * *", tz="UTC",
               exclude=["2030-12-25", "* * * * 0"]) == Outcome.REGISTERED
    entry = run(repeat.get, queue, "d")
    assert entry.exclude == ["2030-12-25", "* * * * 0"]
    christmas = int(dt.datetime(2030, 12, 25, 9, tzinfo=dt.UTC).timestamp() * 1000)
    sunday = int(dt.datetime(2030, 12, 22, 9, tzinfo=dt.UTC).timestamp() * 1000)
    monday = int(dt.datetime(2030, 12, 23, 9, tzinfo=dt.UTC).timestamp() * 1000)
    for slot, fires in ((christmas, False), (sunday, False), (monday, True)):
        assert plan({**entry, "next_at": slot}, slot).slots == ((slot,) if fires else ())
    # the preview marks them, next_runs leaves them out
    shown = repeat.preview({**entry, "next_at": sunday}, 3)
    assert [(s.slot, s.excluded) for s in shown[:2]] == [(sunday, True), (monday, False)]
    runs = repeat.next_runs({**entry, "next_at": sunday}, 3)
    assert int(runs[0].timestamp() * 1000) == monday
    # a firing of an excluded slot enqueues nothing and moves on to the next slot
    raw.zadd(k(queue, "repeat"), {"d": sunday})
    got = run(repeat.fire, queue, run(repeat.get, queue, "d"), sunday)
    assert got.outcome == Outcome.SKIPPED and got.reason == "missed"
    assert run(repeat.get, queue, "d").next_at == monday
    assert run(jobs.counts, queue)["pending"] == 0


def test_bad_steering_options_are_refused_before_any_io(run, snap, queue):
    before = snap(queue)
    for bad in ({"overlap": "sometimes"}, {"jitter_ms": -1}, {"jitter_ms": EVERY + 1},
                {"exclude": ["not a rule"]}, {"exclude": [dt.datetime(2030, 1, 1)]}):
        with pytest.raises((ValueError, TypeError)):
            run(repeat.upsert, queue, "r", template=b"t", every_ms=EVERY, **bad)
    with pytest.raises(ValueError):
        run(repeat.backfill, queue, "r", 10, 5)
    assert snap(queue) == before


# -- pause until --------------------------------------------------------------------------

def test_a_registration_paused_until_an_instant_is_resumed_by_the_sweep(run, raw, queue):
    register(run, queue)
    fire_next(run, queue)  # its first slot
    until = server_ms(raw) + 400
    assert run(repeat.pause, queue, "r", until=until) == Outcome.PAUSED
    entry = run(repeat.get, queue, "r")
    assert entry.paused and entry.paused_until == until
    assert entry.next_at == until  # a Pump planning its wake at the head wakes then
    # due on the registry's clock, but the pause's end has not come on the server's
    (got,) = run(repeat.sweep, queue, until + 1)
    assert got.reason == "paused" and 0 < got.resume_in_ms <= 400
    time.sleep(0.45)
    (got,) = run(repeat.sweep, queue)
    assert got.outcome == Outcome.FIRED  # resumed, and an interval runs at once
    entry = run(repeat.get, queue, "r")
    assert not entry.paused and entry.paused_until is None


def test_a_cron_resumes_at_its_first_slot_from_the_end(run, raw, queue):
    assert run(repeat.upsert, queue, "c", template=b"t", cron="0 0 1 1 *") == (
        Outcome.REGISTERED)
    run(repeat.pause, queue, "c", until=server_ms(raw) + 50)
    time.sleep(0.1)
    (got,) = run(repeat.sweep, queue)
    assert got.outcome == Outcome.RESUMED and not got.ids  # its next slot is in January
    entry = run(repeat.get, queue, "c")
    assert not entry.paused and entry.next_at > server_ms(raw)


def test_manual_resume_drops_the_end(run, raw, queue):
    register(run, queue)
    run(repeat.pause, queue, "r", until=server_ms(raw) + 60_000)
    assert run(repeat.resume, queue, "r") == Outcome.RESUMED
    assert run(repeat.get, queue, "r").paused_until is None


def test_the_server_clock_sweep_plans_on_the_servers_time(run, raw, queue):
    register(run, queue, first_in_ms=0)
    with pytest.raises(ValueError):
        run(repeat.sweep, queue, 1, clock="server")
    (got,) = run(repeat.sweep, queue, clock="server")
    assert got.outcome == Outcome.FIRED
    nxt = run(repeat.get, queue, "r").next_at
    assert abs(nxt - (server_ms(raw) + EVERY)) < 1_000
