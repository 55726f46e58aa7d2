"""The repeat registry on a real Valkey: its base verbs key by key, then fire/upsert/cron.

Every repeat score is HOST-clock ms; the tests bracket the host clock around each call.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import valkey

from echomq import scripts
from echomq.core import cron, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs, repeat

Snap = Callable[[str], dict[bytes, Any]]


def zkey(q: str) -> str:
    return keyspace.queue_key(q, "repeat")


def rkey(q: str, name: str) -> str:
    return keyspace.repeat_key(q, name)


# -- the base verbs, key by key -----------------------------------------------------------


def test_register_writes_record_and_member_on_host_clock(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    before = repeat.now_ms()
    assert run(repeat.register, queue, "daily", 86_400_000, b"tpl", 5_000) == "registered"
    after = repeat.now_ms()
    assert raw.hgetall(rkey(queue, "daily")) == {b"every_ms": b"86400000", b"template": b"tpl"}
    score = raw.zscore(zkey(queue), "daily")
    assert score is not None and before + 5_000 <= score <= after + 5_000
    assert run(repeat.count, queue) == 1


def test_register_existing_name_is_a_no_op(run: Any, snap: Snap, queue: str) -> None:
    assert run(repeat.register, queue, "r", 1000, b"a") == Outcome.REGISTERED
    before = snap(queue)
    assert run(repeat.register, queue, "r", 9999, b"other", 77) == Outcome.EXISTS
    assert snap(queue) == before


@pytest.mark.parametrize(
    ("args", "exc"),
    [
        (("r", 0, b"t"), ValueError),
        (("r", -5, b"t"), ValueError),
        (("r", 1.5, b"t"), TypeError),
        (("r", 1000, 12), TypeError),
        (("r", 1000, b"t", -1), ValueError),
        (("", 1000, b"t"), ValueError),
        ((b"r", 1000, b"t"), TypeError),
    ],
)
def test_register_guards_write_nothing(
    run: Any, snap: Snap, queue: str, args: tuple[Any, ...], exc: type[Exception]
) -> None:
    with pytest.raises(exc):
        run(repeat.register, queue, *args)
    assert snap(queue) == {}


def test_due_reads_names_at_or_before_host_now(run: Any, queue: str) -> None:
    run(repeat.register, queue, "now", 1000, b"n")
    run(repeat.register, queue, "later", 1000, b"l", 60_000)
    got = run(repeat.due, queue)
    assert [e["name"] for e in got] == ["now"]
    entry = got[0]
    assert entry["every_ms"] == 1000 and entry["template"] == b"n"
    assert entry["next_at"] <= repeat.now_ms()
    # an explicit now reaches the later one too
    both = run(repeat.due, queue, repeat.now_ms() + 120_000)
    assert sorted(e["name"] for e in both) == ["later", "now"]


def test_due_lists_a_dangling_member_without_its_record(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    raw.zadd(zkey(queue), {"ghost": 1})
    assert run(repeat.due, queue) == [{"name": "ghost", "next_at": 1}]


def test_entries_are_registrations_typed_and_still_plain_dicts(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.upsert, queue, "night", template=b"n", cron="0 3 * * *", tz="Asia/Tokyo",
        limit=4)
    run(repeat.register, queue, "tick", 1000, b"t")
    raw.hset(rkey(queue, "tick"), "limit", "lots")  # a hand-edited number stays text
    got = {e.name: e for e in run(repeat.records, queue)}
    night, tick = got["night"], got["tick"]
    assert isinstance(night, repeat.Registration) and isinstance(night, dict)
    assert (night.cron, night.tz, night.every_ms, night.limit) == ("0 3 * * *", "Asia/Tokyo",
                                                                   None, 4)
    assert night.template == b"n" and night.fired == 0 and night.paused is False
    assert night.next_at == night["next_at"] and night.next_at is not None
    assert (tick.every_ms, tick.cron, tick.tz, tick["limit"], tick.limit) == (
        1000, None, "UTC", "lots", None)
    fetched = run(repeat.get, queue, "night")
    assert fetched == night and dict(fetched) == dict(night)
    run(repeat.pause, queue, "night")
    assert run(repeat.get, queue, "night").paused is True
    assert run(repeat.get, queue, "nope") is None


def test_advance_measures_from_host_now(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.register, queue, "r", 1000, b"t")
    raw.zadd(zkey(queue), {"r": 5})  # a very late tick
    before = repeat.now_ms()
    assert run(repeat.advance, queue, "r", 30_000) == Outcome.ADVANCED
    score = raw.zscore(zkey(queue), "r")
    # next = host now + period, not old score + period: no backlog of runs
    assert score is not None and before + 30_000 <= score <= repeat.now_ms() + 30_000
    assert raw.hgetall(rkey(queue, "r")) == {b"every_ms": b"1000", b"template": b"t"}


def test_advance_after_cancel_is_absent_and_drops_the_member(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.register, queue, "r", 1000, b"t")
    raw.delete(rkey(queue, "r"))  # cancelled mid-sweep: the record went first
    assert run(repeat.advance, queue, "r", 1000) == Outcome.ABSENT
    assert raw.zscore(zkey(queue), "r") is None
    assert raw.exists(rkey(queue, "r")) == 0


def test_cancel_removes_both(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.register, queue, "a", 1000, b"t")
    run(repeat.register, queue, "b", 1000, b"t")
    assert run(repeat.cancel, queue, "a") == 1
    assert run(repeat.cancel, queue, "a") == 0
    assert raw.zrange(zkey(queue), 0, -1) == [b"b"]
    assert raw.exists(rkey(queue, "a")) == 0
    assert run(repeat.count, queue) == 1


def test_scripts_are_the_seeds_and_documented() -> None:
    for name in ("register", "advance", "fire", "upsert"):
        src = scripts.source(name)
        assert "KEYS[1]" in src.split("\n", 3)[1] and "ARGV[1]" in src


# -- fire: exactly one occurrence per due period ------------------------------------------


def test_fire_enqueues_a_normal_pending_job_and_advances(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.register, queue, "r", 60_000, b'{"task":"report"}')
    (entry,) = run(repeat.due, queue)
    before = repeat.now_ms()
    got = run(repeat.fire, queue, entry)
    assert got.outcome == Outcome.FIRED and len(got.ids) == 1
    (jid,) = got.ids
    assert ids.is_job_id(jid)
    # the row shape of enqueue, claimable now, with the wake token for blocked consumers
    assert raw.hgetall(keyspace.job_key(queue, jid)) == {
        b"state": b"pending",
        b"attempts": b"0",
        b"payload": b'{"task":"report"}',
    }
    assert raw.zrange(keyspace.queue_key(queue, "pending"), 0, -1, withscores=True) == [
        (jid.encode(), 0.0)
    ]
    assert raw.llen(keyspace.queue_key(queue, "wake")) == 1
    score = raw.zscore(zkey(queue), "r")
    assert score is not None and before + 60_000 <= score <= repeat.now_ms() + 60_000
    record = raw.hgetall(rkey(queue, "r"))
    assert record[b"fired"] == b"1" and record[b"last_id"] == jid.encode()
    claim = run(jobs.claim, queue, 30_000)
    assert claim.id == jid and claim.payload == b'{"task":"report"}'


def test_a_second_fire_of_the_same_read_writes_nothing(
    run: Any, snap: Snap, queue: str
) -> None:
    run(repeat.register, queue, "r", 60_000, b"t")
    (entry,) = run(repeat.due, queue)
    first = run(repeat.fire, queue, entry)
    after_first = snap(queue)
    second = run(repeat.fire, queue, entry)
    assert first.outcome == Outcome.FIRED
    assert (second.outcome, second.reason, second.ids) == (Outcome.SKIPPED, "raced", ())
    assert snap(queue) == after_first


def test_fire_after_cancel_is_absent(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.register, queue, "r", 1000, b"t")
    (entry,) = run(repeat.due, queue)
    raw.delete(rkey(queue, "r"))
    got = run(repeat.fire, queue, entry)
    assert got.outcome == Outcome.ABSENT
    assert raw.zcard(zkey(queue)) == 0
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 0


def test_sweep_fires_every_due_name_once(run: Any, raw: valkey.Valkey, queue: str) -> None:
    for i in range(5):
        run(repeat.register, queue, f"r{i}", 60_000, f"t{i}".encode())
    run(repeat.register, queue, "future", 60_000, b"f", 60_000)
    fired = run(repeat.sweep, queue)
    assert sorted(f.name for f in fired) == [f"r{i}" for i in range(5)]
    assert all(f.outcome == Outcome.FIRED for f in fired)
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 5
    assert run(repeat.sweep, queue) == []


# -- limit, end, start --------------------------------------------------------------------


def test_limit_three_fires_three_times_and_stops(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    assert run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, limit=3) == "registered"
    now = repeat.now_ms()
    got = []
    for step in range(6):
        for entry in run(repeat.due, queue, now + step * 1000):
            got.append(run(repeat.fire, queue, entry, now + step * 1000))
    assert [g.outcome for g in got] == [Outcome.FIRED] * 3
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 3
    assert raw.zscore(zkey(queue), "r") == float("inf")
    assert raw.hget(rkey(queue, "r"), "done") == b"limit"
    # re-registering the same definition does not restart it
    assert run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, limit=3) == "exists"
    assert raw.zscore(zkey(queue), "r") == float("inf")
    assert run(repeat.due, queue, now + 10**9) == []
    # raising the limit is an explicit update that re-arms it for the remainder
    assert run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, limit=4) == "updated"
    (entry,) = run(repeat.due, queue, now + 10**9)
    assert run(repeat.fire, queue, entry, now + 10**9).outcome == Outcome.FIRED
    assert raw.hget(rkey(queue, "r"), "fired") == b"4"
    assert raw.zscore(zkey(queue), "r") == float("inf")


def test_limit_caps_a_catchup_burst(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, limit=3, catchup="all")
    (entry,) = run(repeat.due, queue)
    got = run(repeat.fire, queue, entry, entry["next_at"] + 9_500)
    assert len(got.ids) == 3
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 3
    assert raw.hget(rkey(queue, "r"), "done") == b"limit"


def test_start_at_and_end_at(run: Any, raw: valkey.Valkey, queue: str) -> None:
    now = repeat.now_ms()
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000,
        start_at=now + 50_000, end_at=now + 52_500)  # fmt: skip
    assert raw.zscore(zkey(queue), "r") == now + 50_000
    fired = []
    for t in range(now + 50_000, now + 56_000, 1000):
        for entry in run(repeat.due, queue, t):
            fired.append(run(repeat.fire, queue, entry, t))
    assert len([f for f in fired if f.outcome == Outcome.FIRED]) == 3  # +50s, +51s, +52s
    assert raw.hget(rkey(queue, "r"), "done") == b"ended"
    # an end already past: registered, but with no run
    assert run(repeat.upsert, queue, "old", template=b"t", every_ms=1000,
               end_at=now - 1) == "registered"  # fmt: skip
    assert raw.zscore(zkey(queue), "old") == float("inf")


# -- overlap ------------------------------------------------------------------------------


def test_overlap_skip_waits_for_the_last_occurrence(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, overlap="skip")
    now = repeat.now_ms()

    def tick(t: int) -> Any:
        (entry,) = run(repeat.due, queue, t)
        return run(repeat.fire, queue, entry, t)

    first = tick(now)
    assert first.outcome == Outcome.FIRED
    skipped = tick(now + 1000)  # the first occurrence is still pending
    assert (skipped.outcome, skipped.reason) == (Outcome.SKIPPED, "overlap")
    claim = run(jobs.claim, queue, 30_000)
    skipped = tick(now + 2000)  # ... and now active
    assert skipped.reason == "overlap"
    run(jobs.ack, queue, claim.id, claim.token)
    again = tick(now + 3000)
    assert again.outcome == Outcome.FIRED
    assert raw.hget(rkey(queue, "r"), "fired") == b"2"


def test_overlap_allow_fires_while_the_last_is_pending(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000)
    now = repeat.now_ms()
    for step in range(3):
        (entry,) = run(repeat.due, queue, now + step * 1001)
        assert run(repeat.fire, queue, entry, now + step * 1001).outcome == Outcome.FIRED
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 3


# -- missed runs --------------------------------------------------------------------------


def _late(run: Any, queue: str, periods: float, **kw: Any) -> tuple[Any, dict[str, Any], int]:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000, **kw)
    (entry,) = run(repeat.due, queue)
    now = entry["next_at"] + int(periods * 1000)
    return run(repeat.fire, queue, entry, now), entry, now


def test_default_fires_one_occurrence_after_downtime(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    got, _, now = _late(run, queue, 10.5)
    assert len(got.ids) == 1
    assert raw.zscore(zkey(queue), "r") == now + 1000  # advance prices the next run from now


def test_catchup_latest_fires_one_and_stays_on_the_grid(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    got, entry, _ = _late(run, queue, 10.5, catchup="latest")
    assert len(got.ids) == 1
    assert raw.zscore(zkey(queue), "r") == entry["next_at"] + 11_000
    assert raw.hget(rkey(queue, "r"), "last_at") == str(entry["next_at"] + 10_000).encode()


def test_catchup_all_fires_each_missed_slot_in_the_window(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    got, entry, _ = _late(run, queue, 10.5, catchup="all", window_ms=4_000)
    # slots at +7s .. +10s are inside a 4 s window ending at +10.5s
    assert len(got.ids) == 4 and got.ids == tuple(sorted(got.ids))
    pending = raw.zrange(keyspace.queue_key(queue, "pending"), 0, -1)
    assert pending == [i.encode() for i in got.ids]
    assert raw.zscore(zkey(queue), "r") == entry["next_at"] + 11_000


def test_catchup_all_is_capped(run: Any, queue: str) -> None:
    got, _, _ = _late(run, queue, 500, catchup="all", window_ms=3_600_000, cap=7)
    assert len(got.ids) == 7


def test_catchup_skip_drops_stale_slots_and_keeps_fresh_ones(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    got, entry, _ = _late(run, queue, 600.5, catchup="skip", window_ms=200)
    assert (got.outcome, got.reason) == (Outcome.SKIPPED, "missed")
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 0
    assert raw.zscore(zkey(queue), "r") == entry["next_at"] + 601_000
    run(repeat.cancel, queue, "r")
    fresh, _, _ = _late(run, queue, 0.1, catchup="skip", window_ms=200)
    assert fresh.outcome == Outcome.FIRED


# -- cron registrations -------------------------------------------------------------------


def test_register_cron_stores_expression_and_zone(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    before = repeat.now_ms()
    got = run(repeat.register_cron, queue, "nightly", "30 2 * * *", b"t", "Europe/Paris")
    assert got == Outcome.REGISTERED
    record = raw.hgetall(rkey(queue, "nightly"))
    assert record[b"cron"] == b"30 2 * * *" and record[b"tz"] == b"Europe/Paris"
    assert b"every_ms" not in record
    expected = cron.next_ms("30 2 * * *", before, "Europe/Paris")
    assert raw.zscore(zkey(queue), "nightly") == expected
    again = run(repeat.register_cron, queue, "nightly", "0 4 * * *", b"x", "UTC")
    assert again == Outcome.EXISTS
    assert raw.hget(rkey(queue, "nightly"), "cron") == b"30 2 * * *"


def test_cron_fire_advances_to_the_next_slot(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.register_cron, queue, "q", "*/15 * * * *", b"t", "America/New_York")
    entry = run(repeat.get, queue, "q")
    got = run(repeat.fire, queue, entry, entry["next_at"] + 5)
    assert got.outcome == Outcome.FIRED
    assert raw.zscore(zkey(queue), "q") == entry["next_at"] + 15 * 60_000


# zone, expression, the day before the change, the one run on the change day, the next run
NY = "America/New_York"
DST_FIRES = [
    ("Europe/Paris", "30 2 * * *", (2026, 3, 28), (2026, 3, 29, 3, 0, 0), (2026, 3, 30, 2, 30)),
    ("Europe/Paris", "30 2 * * *", (2026, 10, 24), (2026, 10, 25, 2, 30, 0), (2026, 10, 26, 2, 30)),
    (NY, "30 2 * * *", (2026, 3, 7), (2026, 3, 8, 3, 0, 0), (2026, 3, 9, 2, 30)),
    (NY, "30 1 * * *", (2026, 10, 31), (2026, 11, 1, 1, 30, 0), (2026, 11, 2, 1, 30)),
]  # fmt: skip


@pytest.mark.parametrize(("tz", "expr", "before", "once", "after"), DST_FIRES)
def test_cron_fires_once_on_dst_change_days(
    run: Any, raw: valkey.Valkey, queue: str, tz: str, expr: str,
    before: tuple[int, ...], once: tuple[int, ...], after: tuple[int, ...],
) -> None:  # fmt: skip
    zi = ZoneInfo(tz)
    start = int(datetime(*before, 12, tzinfo=zi).timestamp() * 1000)
    run(repeat.upsert, queue, "r", template=b"t", cron=expr, tz=tz)
    # as if registered at noon the day before: the first run priced then
    raw.zadd(zkey(queue), {"r": cron.next_ms(expr, start, tz)})
    # a Pump sweeping every 10 minutes through the change day fires exactly once
    t, fired = start, []
    while t < start + 86_400_000:
        for entry in run(repeat.due, queue, t):
            fired.append((t, run(repeat.fire, queue, entry, t)))
        t += 600_000
    assert [f.outcome for _, f in fired] == [Outcome.FIRED]
    # fold=0: on a fall-back day the first (summer-time) of the two instants
    expected = datetime(*once[:5], tzinfo=zi, fold=once[5]).timestamp() * 1000
    assert raw.hget(rkey(queue, "r"), "last_at") == str(int(expected)).encode()
    assert fired[0][0] - 600_000 < expected <= fired[0][0]
    assert raw.zscore(zkey(queue), "r") == datetime(*after, tzinfo=zi).timestamp() * 1000


# -- upsert -------------------------------------------------------------------------------


def test_upsert_registered_exists_updated(run: Any, raw: valkey.Valkey, queue: str) -> None:
    kw: dict[str, Any] = {"template": b"t", "every_ms": 60_000, "first_in_ms": 10_000}
    assert run(repeat.upsert, queue, "r", **kw) == Outcome.REGISTERED
    score = raw.zscore(zkey(queue), "r")
    assert run(repeat.upsert, queue, "r", **kw) == Outcome.EXISTS
    assert raw.zscore(zkey(queue), "r") == score
    # a template change keeps the next run; a cadence change re-prices it
    assert run(repeat.upsert, queue, "r", **{**kw, "template": b"u"}) == Outcome.UPDATED
    assert raw.zscore(zkey(queue), "r") == score
    assert raw.hget(rkey(queue, "r"), "template") == b"u"
    before = repeat.now_ms()
    assert run(repeat.upsert, queue, "r", template=b"u", cron="@daily") == Outcome.UPDATED
    record = raw.hgetall(rkey(queue, "r"))
    assert b"every_ms" not in record and record[b"cron"] == b"@daily"
    assert raw.zscore(zkey(queue), "r") == cron.next_ms("@daily", before, "UTC")


def test_upsert_keeps_the_occurrence_count(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000)
    (entry,) = run(repeat.due, queue)
    run(repeat.fire, queue, entry)
    run(repeat.upsert, queue, "r", template=b"t2", every_ms=2000)
    assert raw.hget(rkey(queue, "r"), "fired") == b"1"


def test_upsert_matches_a_seed_registration(run: Any, queue: str) -> None:
    run(repeat.register, queue, "r", 1000, b"t")
    assert run(repeat.upsert, queue, "r", template=b"t", every_ms=1000) == Outcome.EXISTS


def test_re_registering_heals_a_lost_member(run: Any, raw: valkey.Valkey, queue: str) -> None:
    run(repeat.upsert, queue, "r", template=b"t", every_ms=1000)
    raw.zrem(zkey(queue), "r")
    assert run(repeat.upsert, queue, "r", template=b"t", every_ms=1000) == Outcome.EXISTS
    assert raw.zscore(zkey(queue), "r") is not None


@pytest.mark.parametrize(
    "kw",
    [
        {"template": b"t"},
        {"template": b"t", "every_ms": 1000, "cron": "* * * * *"},
        {"template": b"t", "cron": "61 * * * *"},
        {"template": b"t", "cron": "* * * * *", "tz": "Nowhere/Town"},
        {"template": b"t", "every_ms": 1000, "window_ms": 10},
        {"template": b"t", "every_ms": 1000, "catchup": "some"},
        {"template": b"t", "every_ms": 1000, "catchup": "skip", "cap": 3},
        {"template": b"t", "every_ms": 1000, "overlap": "queue"},
        {"template": b"t", "every_ms": 1000, "limit": 0},
        {"template": b"t", "every_ms": 1000, "start_at": 10, "end_at": 5},
        {"template": b"t", "cron": "* * * * *", "first_in_ms": 5},
        {"template": 5, "every_ms": 1000},
    ],
)
def test_upsert_refuses_bad_definitions_before_io(
    run: Any, snap: Snap, queue: str, kw: dict[str, Any]
) -> None:
    with pytest.raises((ValueError, TypeError)):
        run(repeat.upsert, queue, "r", **kw)
    assert snap(queue) == {}


# -- next runs ----------------------------------------------------------------------------


def test_next_runs_of_records_and_expressions(run: Any, queue: str) -> None:
    run(repeat.upsert, queue, "every", template=b"t", every_ms=60_000, limit=3)
    entry = run(repeat.get, queue, "every")
    got = repeat.next_runs(entry, 5)
    assert len(got) == 3  # the limit leaves three
    assert [int(g.timestamp() * 1000) for g in got] == [
        entry["next_at"] + k * 60_000 for k in range(3)
    ]
    run(repeat.register_cron, queue, "c", "0 9 * * *", b"t", "Asia/Tokyo")
    c = run(repeat.get, queue, "c")
    runs = repeat.next_runs(c, 3)
    assert [r.hour for r in runs] == [9, 9, 9] and runs[0].tzinfo == ZoneInfo("Asia/Tokyo")
    assert runs[1].astimezone(UTC) - runs[0].astimezone(UTC) == timedelta(days=1)
    expr = repeat.next_runs("@hourly", 2, "UTC", after=0)
    assert [e.isoformat() for e in expr] == [
        "1970-01-01T01:00:00+00:00",
        "1970-01-01T02:00:00+00:00",
    ]
    assert run(repeat.get, queue, "missing") is None


def test_records_lists_everything_soonest_first(run: Any, queue: str) -> None:
    run(repeat.upsert, queue, "later", template=b"t", every_ms=1000, first_in_ms=50_000)
    run(repeat.upsert, queue, "sooner", template=b"t", every_ms=1000)
    run(repeat.upsert, queue, "over", template=b"t", every_ms=1000, end_at=1)
    got = run(repeat.records, queue)
    assert [e["name"] for e in got] == ["sooner", "later", "over"]
    assert got[-1]["next_at"] is None and got[-1]["done"] == "ended"


def test_a_bounded_sweep_takes_the_most_overdue(run: Any, raw: valkey.Valkey, queue: str) -> None:
    for i in range(6):
        run(repeat.register, queue, f"r{i}", 60_000, b"t")
        raw.zadd(zkey(queue), {f"r{i}": 1000 - i})  # r5 is the most overdue
    got = run(repeat.sweep, queue, None, 2)
    assert [f.name for f in got] == ["r5", "r4"]
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 2


def test_an_unplannable_record_is_reported_not_fatal(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.upsert, queue, "bad", template=b"t", cron="* * * * *")
    run(repeat.upsert, queue, "good", template=b"t", every_ms=60_000)
    raw.hset(rkey(queue, "bad"), "tz", "Nowhere/Town")  # hand-edited
    raw.zadd(zkey(queue), {"bad": 1})
    got = {f.name: (f.outcome, f.reason) for f in run(repeat.sweep, queue)}
    assert got == {"bad": (Outcome.SKIPPED, "invalid"), "good": (Outcome.FIRED, "")}
    assert raw.zscore(zkey(queue), "bad") == 1  # left as it is


# -- pause and resume ---------------------------------------------------------------------


def test_pause_keeps_record_and_score_and_sweep_mints_nothing_then_resume_fires(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    assert run(repeat.upsert, queue, "beat", template=b"t", every_ms=60_000) == "registered"
    score = raw.zscore(zkey(queue), "beat")
    assert run(repeat.pause, queue, "beat") == Outcome.PAUSED
    assert run(repeat.pause, queue, "beat") == "paused"  # a no-op
    assert raw.zscore(zkey(queue), "beat") == score
    assert run(repeat.get, queue, "beat")["paused"] is True
    assert [e["paused"] for e in run(repeat.records, queue)] == [True]
    later = repeat.now_ms() + 10 * 60_000  # well past due
    got = run(repeat.sweep, queue, later)
    assert [(f.outcome, f.reason) for f in got] == [("skipped", "paused")]
    # the script refuses too: a pause between a pump's due read and its fire
    entry = run(repeat.due, queue, later)[0]
    assert entry["paused"] is True
    del entry["paused"]
    assert run(repeat.fire, queue, entry, later).reason == "paused"
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 0
    assert raw.hget(rkey(queue, "beat"), "fired") is None
    assert raw.zscore(zkey(queue), "beat") == score

    before = repeat.now_ms()
    assert run(repeat.resume, queue, "beat") == Outcome.RESUMED
    after = repeat.now_ms()
    assert before <= raw.zscore(zkey(queue), "beat") <= after  # re-armed from HOST now
    assert run(repeat.get, queue, "beat")["paused"] is False
    got = run(repeat.sweep, queue)
    assert [f.outcome for f in got] == ["fired"] and len(got[0].ids) == 1
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 1
    assert run(repeat.resume, queue, "beat") == "resumed"  # not paused: nothing changes
    assert raw.zscore(zkey(queue), "beat") > after


def test_resume_a_cron_goes_to_its_next_slot_and_a_finished_one_stays_parked(
    run: Any, raw: valkey.Valkey, queue: str
) -> None:
    run(repeat.register_cron, queue, "nightly", "30 2 * * *", b"t", tz="Europe/Paris")
    run(repeat.pause, queue, "nightly")
    now = repeat.now_ms()
    run(repeat.resume, queue, "nightly")
    assert raw.zscore(zkey(queue), "nightly") == cron.next_ms("30 2 * * *", now, "Europe/Paris")
    run(repeat.upsert, queue, "once", template=b"t", every_ms=1000, limit=1)
    run(repeat.sweep, queue, repeat.now_ms() + 1)
    assert raw.hget(rkey(queue, "once"), "done") == b"limit"
    run(repeat.pause, queue, "once")
    assert run(repeat.resume, queue, "once") == "resumed"
    assert raw.zscore(zkey(queue), "once") == float("inf")


def test_pause_and_resume_of_an_unknown_name_are_absent(run: Any, queue: str) -> None:
    assert run(repeat.pause, queue, "ghost") == Outcome.ABSENT
    assert run(repeat.resume, queue, "ghost") == Outcome.ABSENT
    with pytest.raises(ValueError):
        run(repeat.pause, queue, "")
