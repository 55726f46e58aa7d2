"""Every job transition on a real Valkey, key by key, on both connectors (``run``)."""

from __future__ import annotations

import pytest

from echomq.core import errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


# -- enqueue ---------------------------------------------------------------------------------


def test_enqueue_writes_row_and_pending(run, raw, queue):
    jid = ids.mint()
    assert run(jobs.enqueue, queue, jid, b"hello") == Outcome.ENQUEUED
    assert raw.hgetall(keyspace.job_key(queue, jid)) == {
        b"state": b"pending", b"attempts": b"0", b"payload": b"hello"
    }
    assert raw.zrange(k(queue, "pending"), 0, -1, withscores=True) == [(jid.encode(), 0.0)]
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]


def test_enqueue_duplicate_writes_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, "first")
    before = snap(queue)
    assert run(jobs.enqueue, queue, jid, "second") == "duplicate"
    assert snap(queue) == before


def test_enqueue_refuses_foreign_id_and_writes_nothing(run, queue, snap):
    with pytest.raises(errors.KindError) as exc:
        run(jobs.enqueue, queue, "TASK01", b"x")
    assert str(exc.value) == "EMQKIND job id must be JOB-namespaced"
    assert snap(queue) == {}


@pytest.mark.parametrize(
    ("args", "exc"),
    [
        ((123, b"x"), TypeError),
        (("JOBX", 5), TypeError),
    ],
)
def test_enqueue_guards_before_io(run, queue, snap, args, exc):
    with pytest.raises(exc):
        run(jobs.enqueue, queue, *args)
    assert snap(queue) == {}


@pytest.mark.parametrize("bad", ["", "a{b", "x}", "q" * 201])
def test_bad_queue_names_refused_before_io(run, bad):
    with pytest.raises(ValueError):
        run(jobs.enqueue, bad, ids.mint(), b"x")


# -- schedule (enqueue_at / enqueue_in) ------------------------------------------------------


def test_enqueue_in_scores_server_time_plus_delay(run, raw, queue):
    jid = ids.mint()
    before = server_ms(raw)
    assert run(jobs.enqueue_in, queue, jid, b"p", 5_000) == Outcome.SCHEDULED
    after = server_ms(raw)
    score = raw.zscore(k(queue, "schedule"), jid)
    assert before + 5_000 <= score <= after + 5_000
    assert raw.hgetall(keyspace.job_key(queue, jid)) == {
        b"state": b"scheduled", b"attempts": b"0", b"payload": b"p"
    }
    assert not raw.exists(k(queue, "pending"))


def test_enqueue_at_scores_literal_value(run, raw, queue):
    jid = ids.mint()
    assert run(jobs.enqueue_at, queue, jid, b"p", 1_234_567) == "scheduled"
    assert raw.zscore(k(queue, "schedule"), jid) == 1_234_567.0


def test_script_admits_a_negative_run_at(run_script, raw, queue):
    # enqueue_at guards only is_integer: a negative run-at reaches the script (the native
    # twin refuses it with its due text: tests/native/test_native_divergence.py)
    neg = ids.mint()
    assert run_script(jobs.enqueue_at, queue, neg, b"p", -5) == "scheduled"
    assert raw.zscore(k(queue, "schedule"), neg) == -5.0


def test_schedule_duplicate_and_kind(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    before = snap(queue)
    assert run(jobs.enqueue_in, queue, jid, b"y", 10) == "duplicate"
    assert run(jobs.enqueue_at, queue, jid, b"y", 10) == "duplicate"
    with pytest.raises(errors.KindError, match=r"^EMQKIND job id must be JOB-namespaced$"):
        run(jobs.enqueue_at, queue, "abc", b"y", 10)
    assert snap(queue) == before


@pytest.mark.parametrize(
    ("verb", "value", "exc"),
    [
        (jobs.enqueue_in, -1, ValueError),
        (jobs.enqueue_in, 1.5, TypeError),
        (jobs.enqueue_in, True, TypeError),
        (jobs.enqueue_at, "10", TypeError),
        (jobs.enqueue_at, 1.0, TypeError),
    ],
)
def test_schedule_guards(run, queue, snap, verb, value, exc):
    with pytest.raises(exc):
        run(verb, queue, ids.mint(), b"x", value)
    assert snap(queue) == {}


def test_schedule_via_dispatches_through_the_given_module(run, raw, queue):
    calls = []

    class Via:
        def eval(self, conn, script, keys, args):
            calls.append((script, tuple(keys), tuple(args)))
            return conn.eval(script, keys, args)

    jid = ids.mint()
    assert run(jobs.enqueue_at, queue, jid, b"p", 42, via=Via()) == "scheduled"
    assert calls == [
        ("schedule", (keyspace.job_key(queue, jid), k(queue, "schedule")), (jid, b"p", "at", "42"))
    ]
    assert raw.zscore(k(queue, "schedule"), jid) == 42.0


# -- promote ---------------------------------------------------------------------------------


def test_promote_releases_due_on_server_clock_in_batches(run, raw, queue):
    now = server_ms(raw)
    due = [ids.mint() for _ in range(5)]
    later = ids.mint()
    for jid in due:
        run(jobs.enqueue_at, queue, jid, b"x", now - 1000)
    run(jobs.enqueue_at, queue, later, b"x", now + 60_000)
    assert run(jobs.promote, queue, 3) == 3
    assert run(jobs.promote, queue, 3) == 2
    assert run(jobs.promote, queue, 3) == 0  # idempotent: nothing left due
    assert [m.decode() for m in raw.zrange(k(queue, "pending"), 0, -1)] == due
    assert raw.zrange(k(queue, "schedule"), 0, -1) == [later.encode()]
    for jid in due:
        assert raw.hget(keyspace.job_key(queue, jid), "state") == b"pending"
    assert raw.hget(keyspace.job_key(queue, later), "state") == b"scheduled"


def test_claims_come_in_mint_order_whatever_the_release_order(run, raw, queue):
    now = server_ms(raw)
    minted = [ids.mint() for _ in range(6)]
    # the last minted is due first: release order is the reverse of mint order
    for i, jid in enumerate(minted):
        run(jobs.enqueue_at, queue, jid, b"x", now - 10 * i)
    for _ in range(6):
        run(jobs.promote, queue, 1)
    claimed = [run(jobs.claim, queue, 30_000).id for _ in range(6)]
    assert claimed == minted
    assert run(jobs.claim, queue, 30_000) is None


def test_promote_routes_grouped_rows_to_their_lane(run_script, raw, queue):
    jid = ids.mint()
    run_script(jobs.enqueue_at, queue, jid, b"x", 0)
    raw.hset(keyspace.job_key(queue, jid), "group", "acme")
    assert run_script(jobs.promote, queue, 10) == 1
    assert raw.zrange(keyspace.lane_key(queue, "acme"), 0, -1, withscores=True) == [
        (jid.encode(), 0.0)
    ]
    assert not raw.exists(k(queue, "pending"))
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"pending"


def test_promote_ghost_gets_a_skeleton_row(run_script, raw, queue):
    # the schedule script: a scheduled id with no row is added to pending and HSET creates
    # a skeleton row (the native twin only removes it: a documented divergence)
    ghost = ids.mint()
    raw.zadd(k(queue, "schedule"), {ghost: 0})
    assert run_script(jobs.promote, queue, 10) == 1
    assert raw.zrange(k(queue, "pending"), 0, -1) == [ghost.encode()]
    assert raw.hgetall(keyspace.job_key(queue, ghost)) == {b"state": b"pending"}


@pytest.mark.parametrize("batch", [0, -1, 1.5, "10"])
def test_promote_guards(run, queue, batch):
    with pytest.raises((ValueError, TypeError)):
        run(jobs.promote, queue, batch)


# -- claim, ack ------------------------------------------------------------------------------


def test_claim_leases_and_increments_attempts(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"payload")
    before = server_ms(raw)
    got = run(jobs.claim, queue, 10_000)
    after = server_ms(raw)
    assert got == (jid, 1, b"payload")
    assert before + 10_000 <= raw.zscore(k(queue, "active"), jid) <= after + 10_000
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"active" and row[b"attempts"] == b"1"
    assert not raw.exists(k(queue, "pending"))


def test_claim_many_takes_up_to_count_in_mint_order(run, queue):
    minted = [ids.mint() for _ in range(5)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted])
    got = run(jobs.claim_many, queue, 1000, 3)
    assert [c.id for c in got] == minted[:3]
    assert [c.token for c in got] == [1, 1, 1]
    assert [c.id for c in run(jobs.claim_many, queue, 1000, 10)] == minted[3:]
    assert run(jobs.claim_many, queue, 1000, 10) == []


def test_claim_buries_ghosts_and_claims_the_next(run, raw, queue):
    # nothing a claim pops is dropped: an id with no row ends dead, with the reason
    # (tests/verbs/test_corrupt_rows.py has the other rows a claim cannot run)
    ghost = ids.mint()
    real = ids.mint()
    raw.zadd(k(queue, "pending"), {ghost: 0})
    run(jobs.enqueue, queue, real, b"x")
    assert run(jobs.claim, queue, 1000).id == real
    assert raw.hget(keyspace.job_key(queue, ghost), "error") == b"corrupt row: no row"


def test_ack_completes_and_keeps_or_deletes(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    run(jobs.enqueue_many, queue, [(a, b"x"), (b, b"y")])
    ca = run(jobs.claim, queue, 1000)
    cb = run(jobs.claim, queue, 1000)
    now = server_ms(raw)
    assert run(jobs.ack, queue, ca.id, ca.token) is None
    row = raw.hgetall(keyspace.job_key(queue, a))
    assert row[b"state"] == b"completed"
    assert abs(int(row[b"completed_at"]) - now) < 5_000
    assert raw.zscore(k(queue, "completed"), a) == int(row[b"completed_at"])
    run(jobs.ack, queue, cb.id, cb.token, keep=False)
    assert not raw.exists(keyspace.job_key(queue, b))
    assert not raw.exists(k(queue, "active"))


def test_ack_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 10_000)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE ack token mismatch$"):
        run(jobs.ack, queue, jid, c.token + 1)
    with pytest.raises(errors.GoneError, match=r"^EMQSTALE job gone$"):
        run(jobs.ack, queue, ids.mint(), 1)
    with pytest.raises(errors.KindError):
        run(jobs.ack, queue, "nope", 1)
    assert snap(queue) == before


# -- retry -----------------------------------------------------------------------------------


def test_retry_parks_on_server_clock_then_dead_letters(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 10_000)
    before = server_ms(raw)
    assert run(jobs.retry, queue, jid, c.token, 2_000, 2, "boom 1") == Outcome.RETRYING
    after = server_ms(raw)
    assert before + 2_000 <= raw.zscore(k(queue, "schedule"), jid) <= after + 2_000
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"scheduled" and row[b"error"] == b"boom 1"
    assert row[b"failures"] == b"1" and row[b"attempts"] == b"1"
    assert not raw.exists(k(queue, "active"))

    raw.zadd(k(queue, "schedule"), {jid: 0})  # make it due now
    run(jobs.promote, queue, 10)
    c2 = run(jobs.claim, queue, 10_000)
    assert c2.token == 2
    assert run(jobs.retry, queue, jid, c2.token, 2_000, 2, "boom 2") == Outcome.DEAD
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"dead" and row[b"error"] == b"boom 2" and row[b"failures"] == b"2"
    assert raw.zscore(k(queue, "dead"), jid) == int(row[b"died_at"])
    assert not raw.exists(k(queue, "schedule"))


def test_retry_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 10_000)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE retry token mismatch$"):
        run(jobs.retry, queue, jid, c.token + 1, 0, 5, "e")
    with pytest.raises(errors.GoneError):
        run(jobs.retry, queue, ids.mint(), 1, 0, 5, "e")
    with pytest.raises(errors.KindError):
        run(jobs.retry, queue, "x", 1, 0, 5, "e")
    with pytest.raises(ValueError):
        run(jobs.retry, queue, jid, c.token, -1, 5, "e")
    with pytest.raises(ValueError):
        run(jobs.retry, queue, jid, c.token, 0, 0, "e")
    assert snap(queue) == before


# -- delay -----------------------------------------------------------------------------------


def test_delay_keeps_attempts_and_payload(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"keep me")
    c = run(jobs.claim, queue, 10_000)
    raw.hset(keyspace.job_key(queue, jid), mapping={"failures": 3, "stalled": 1})
    before = server_ms(raw)
    assert run(jobs.delay, queue, jid, c.token, 1_500) is None
    after = server_ms(raw)
    assert before + 1_500 <= raw.zscore(k(queue, "schedule"), jid) <= after + 1_500
    assert raw.hgetall(keyspace.job_key(queue, jid)) == {
        b"state": b"scheduled", b"attempts": b"1", b"payload": b"keep me",
        b"failures": b"3", b"stalled": b"1",
    }
    assert not raw.exists(k(queue, "active"))
    # the next claim increments attempts as after any retry; delay never dead-letters
    raw.zadd(k(queue, "schedule"), {jid: 0})
    run(jobs.promote, queue, 1)
    c2 = run(jobs.claim, queue, 10_000)
    assert c2.token == 2
    run(jobs.delay, queue, jid, c2.token, 99, mode="at")
    assert raw.zscore(k(queue, "schedule"), jid) == 99.0
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"scheduled"


def test_delay_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 10_000)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE delay token mismatch$") as exc:
        run(jobs.delay, queue, jid, c.token + 1, 10)
    assert not isinstance(exc.value, errors.GoneError)
    with pytest.raises(errors.GoneError, match=r"^EMQSTALE job gone$"):
        run(jobs.delay, queue, ids.mint(), 1, 10)
    with pytest.raises(errors.KindError, match=r"^EMQKIND job id must be JOB-namespaced$"):
        run(jobs.delay, queue, "X1", 1, 10)
    with pytest.raises(ValueError):
        run(jobs.delay, queue, jid, c.token, 10, mode="later")
    with pytest.raises(TypeError):
        run(jobs.delay, queue, jid, c.token, 1.5)
    assert snap(queue) == before


def test_scripted_delay_of_a_reaped_holder_schedules_anyway(run_script, raw, queue):
    # by contract: the script's ZREM is a no-op and the job is scheduled all the same
    jid = ids.mint()
    run_script(jobs.enqueue, queue, jid, b"x")
    c = run_script(jobs.claim, queue, 10_000)
    raw.zrem(k(queue, "active"), jid)
    run_script(jobs.delay, queue, jid, c.token, 10)
    assert raw.zscore(k(queue, "schedule"), jid) is not None


# -- reap, extend, fencing -------------------------------------------------------------------


def test_reap_returns_expired_leases_and_fences_the_old_holder(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    old = run(jobs.claim, queue, 10_000)
    assert run(jobs.reap, queue, 10) == 0  # lease still live
    raw.zadd(k(queue, "active"), {jid: 1})  # expire it
    assert run(jobs.reap, queue, 10) == 1
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"pending" and row[b"stalled"] == b"1" and row[b"attempts"] == b"1"
    assert raw.zrange(k(queue, "pending"), 0, -1) == [jid.encode()]
    # before anyone reclaims it the old holder is not active any more
    with pytest.raises(errors.StateError, match=r"^EMQSTATE ack not active$"):
        run(jobs.ack, queue, jid, old.token)
    new = run(jobs.claim, queue, 10_000)
    assert new.token == old.token + 1
    snapshot_before = raw.hgetall(keyspace.job_key(queue, jid))
    with pytest.raises(errors.StaleError):
        run(jobs.ack, queue, jid, old.token)
    with pytest.raises(errors.StaleError):
        run(jobs.delay, queue, jid, old.token, 10)
    with pytest.raises(errors.StaleError):
        run(jobs.retry, queue, jid, old.token, 10, 5, "late")
    with pytest.raises(errors.StaleError):
        run(jobs.extend, queue, jid, old.token, 10_000)
    assert raw.hgetall(keyspace.job_key(queue, jid)) == snapshot_before
    run(jobs.ack, queue, jid, new.token)
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"completed"


def test_reap_dead_letters_past_the_stall_threshold(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    for _ in range(2):
        run(jobs.claim, queue, 10_000)
        raw.zadd(k(queue, "active"), {jid: 1})
        assert run(jobs.reap, queue, 10, max_stalled=1) == 1
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert row[b"state"] == b"dead" and row[b"stalled"] == b"2" and row[b"error"] == b"stalled"
    assert raw.zscore(k(queue, "dead"), jid) is not None
    assert not raw.exists(k(queue, "pending"))


def test_reap_is_batch_bounded(run, raw, queue):
    minted = [ids.mint() for _ in range(5)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted])
    run(jobs.claim_many, queue, 10_000, 5)
    raw.zadd(k(queue, "active"), dict.fromkeys(minted, 1))
    assert run(jobs.reap, queue, 2) == 2
    assert run(jobs.reap, queue, 10) == 3
    assert raw.zcard(k(queue, "pending")) == 5


def test_extend_moves_the_lease(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 1_000)
    before = server_ms(raw)
    expires = run(jobs.extend, queue, jid, c.token, 60_000)
    assert expires >= before + 60_000
    assert raw.zscore(k(queue, "active"), jid) == expires
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE extend token mismatch$"):
        run(jobs.extend, queue, jid, c.token + 1, 60_000)


# -- reads -----------------------------------------------------------------------------------


def test_get_and_counts(run, queue):
    a, b = ids.mint(), ids.mint()
    run(jobs.enqueue, queue, a, b"x")
    run(jobs.enqueue_in, queue, b, b"y", 60_000)
    assert run(jobs.get, queue, a) == {"state": "pending", "attempts": "0", "payload": b"x"}
    assert run(jobs.get, queue, ids.mint()) is None
    assert run(jobs.counts, queue) == {
        "pending": 1, "scheduled": 1, "active": 0, "dead": 0, "completed": 0, "cancelled": 0
    }


def test_schedule_many_mixes_modes_and_reports_duplicates(run, raw, queue):
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    run(jobs.enqueue, queue, c, b"x")
    items = [(a, b"1", "at", 5), (b, b"2", "in", 0), (c, b"3", "at", 1)]
    out = run(jobs.schedule_many, queue, items)
    assert out == ["scheduled", "scheduled", "duplicate"]
    assert raw.zscore(k(queue, "schedule"), a) == 5.0
    with pytest.raises(ValueError):
        run(jobs.schedule_many, queue, [(ids.mint(), b"1", "in", -1)])


# -- bulk verbs ------------------------------------------------------------------------------


def test_enqueue_many_spans_chunks_and_keeps_order(run, raw, queue):
    minted = [ids.mint() for _ in range(jobs.CHUNK * 2 + 7)]
    run(jobs.enqueue, queue, minted[3], b"already")
    out = run(jobs.enqueue_many, queue, [(j, b"p") for j in minted])
    assert out[3] == "duplicate" and out.count("enqueued") == len(minted) - 1
    assert [m.decode() for m in raw.zrange(k(queue, "pending"), 0, -1)] == minted
    assert raw.hgetall(keyspace.job_key(queue, minted[-1])) == {
        b"state": b"pending", b"attempts": b"0", b"payload": b"p"
    }
    assert raw.hget(keyspace.job_key(queue, minted[3]), "payload") == b"already"


def test_bulk_verbs_refuse_a_foreign_id_before_writing(run, queue, snap):
    good = [(ids.mint(), b"p") for _ in range(jobs.CHUNK + 1)]
    with pytest.raises(errors.KindError, match=r"^EMQKIND job id must be JOB-namespaced$"):
        run(jobs.enqueue_many, queue, [*good, ("nope", b"x")])
    with pytest.raises(errors.KindError):
        run(jobs.schedule_many, queue, [(j, p, "in", 5) for j, p in good] + [("x", b"", "at", 1)])
    assert snap(queue) == {}
    assert run(jobs.enqueue_many, queue, []) == []


def test_bulk_scripts_refuse_foreign_ids_on_the_server_too(raw, queue, snap):
    from echomq import scripts

    with pytest.raises(Exception, match="EMQKIND job id must be JOB-namespaced"):
        raw.eval(scripts.source("enqueue_many"), 1, k(queue, "pending"), keyspace.base(queue),
                 ids.mint(), "a", "BAD", "b")
    assert snap(queue) == {}


def test_ack_many_reports_each_refusal_in_its_slot(run, raw, queue):
    minted = [ids.mint() for _ in range(4)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted])
    held = run(jobs.claim_many, queue, 60_000, 4)
    raw.zrem(k(queue, "active"), held[3].id)  # as if reaped
    out = run(jobs.ack_many, queue, [
        (held[0].id, held[0].token),
        (held[1].id, held[1].token + 1),
        (ids.mint(), 1),
        (held[3].id, held[3].token),
        ("foreign", 1),
        (held[2].id, held[2].token),
    ], keep=False)
    assert out[0] is None and out[5] is None
    assert isinstance(out[1], errors.StaleError) and str(out[1]) == "EMQSTALE ack token mismatch"
    assert isinstance(out[2], errors.GoneError)
    assert isinstance(out[3], errors.StateError) and str(out[3]) == "EMQSTATE ack not active"
    assert isinstance(out[4], errors.KindError)
    assert not raw.exists(keyspace.job_key(queue, held[0].id))
    assert raw.hget(keyspace.job_key(queue, held[1].id), "state") == b"active"
    assert raw.zscore(k(queue, "active"), held[1].id) is not None


def test_ack_and_claim_settles_then_takes_the_next_in_one_trip(run, raw, queue):
    minted = [ids.mint() for _ in range(5)]
    run(jobs.enqueue_many, queue, [(j, b"x") for j in minted])
    first = run(jobs.claim_many, queue, 60_000, 2)
    refusals, more = run(jobs.ack_and_claim, queue, [(c.id, c.token) for c in first] +
                         [(first[0].id, first[0].token)], 60_000, 2, keep=False)
    assert refusals[:2] == [None, None] and isinstance(refusals[2], errors.GoneError)
    assert [c.id for c in more] == minted[2:4]
    assert not raw.exists(keyspace.job_key(queue, minted[0]))
    assert run(jobs.ack_and_claim, queue, [], 60_000, 0) == ([], [])
    _, last = run(jobs.ack_and_claim, queue, [], 60_000, 5)
    assert [c.id for c in last] == minted[4:]


@pytest.mark.topologies
def test_ack_and_claim_queues_settles_and_claims_each_partition_in_one_trip(run, raw, queue):
    qa, qb = queue + "#0", queue + "#1"  # two hash tags: two primaries on a cluster
    a = [ids.mint() for _ in range(3)]
    b = [ids.mint() for _ in range(3)]
    run(jobs.enqueue_many, qa, [(j, b"x") for j in a])
    run(jobs.enqueue_many, qb, [(j, b"y") for j in b])
    refusals, got = run(jobs.ack_and_claim_queues, {}, {qa: 2, qb: 1, "unused": 0}, 60_000)
    assert refusals == {} and list(got) == [qa, qb]
    assert [c.id for c in got[qa]] == a[:2] and [c.id for c in got[qb]] == b[:1]
    held = {qa: [(c.id, c.token) for c in got[qa]] + [("JOBnope", 1)],
            qb: [(c.id, c.token) for c in got[qb]]}
    refusals, got = run(jobs.ack_and_claim_queues, held, {qb: 5}, 60_000, keep=False)
    assert refusals[qa][:2] == [None, None] and isinstance(refusals[qa][2], errors.GoneError)
    assert refusals[qb] == [None]
    assert [c.id for c in got[qb]] == b[1:]
    assert not raw.exists(keyspace.job_key(qa, a[0]))
    assert run(jobs.ack_and_claim_queues, {}, {}, 60_000) == ({}, {})
