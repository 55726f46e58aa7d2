"""The doctor finds each corruption a test injects into a live queue, and ``fix`` repairs it:
after the repair a second check is clean and the queue runs the job as it should."""

from __future__ import annotations

import pytest

from echomq import ids, keyspace
from echomq.verbs import doctor, groups, jobs


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def kinds(findings) -> list[tuple[str, str]]:
    return sorted((f.kind, f.subject) for f in findings)


def found_then_fixed(run, queue, expect: list[tuple[str, str]]) -> list[doctor.Finding]:
    assert kinds(run(doctor.check, queue)) == sorted(expect)
    assert kinds(run(doctor.check, queue)) == sorted(expect)  # a check writes nothing
    fixed = run(doctor.check, queue, fix=True)
    assert kinds(fixed) == sorted(expect) and all(f.repaired for f in fixed), fixed
    assert run(doctor.check, queue) == []
    return fixed


def test_a_clean_queue_has_no_finding(run, queue):
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    run(jobs.enqueue, queue, a, b"x", group="g1")
    run(jobs.enqueue_in, queue, b, b"x", 60_000)
    run(jobs.enqueue, queue, c, b"x")
    run(jobs.claim, queue, 60_000)
    assert run(doctor.check, queue) == []
    assert run(doctor.check, queue, fix=True) == []


def test_a_row_missing_from_its_set(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    raw.zrem(k(queue, "pending"), jid)
    [f] = found_then_fixed(run, queue, [("missing", jid)])
    assert f.detail == "state 'pending' but not on pending"
    assert run(jobs.claim, queue, 1000).id == jid


def test_a_grouped_row_missing_from_its_lane(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="acme")
    raw.zrem(keyspace.lane_key(queue, "acme"), jid)
    raw.zrem(k(queue, "ring"), "acme")  # the lane emptied: the ring dropped it too
    found_then_fixed(run, queue, [("missing", jid)])
    assert run(jobs.claim, queue, 1000).id == jid


def test_an_index_entry_without_a_row(run, raw, queue):
    ghost = ids.mint()
    raw.zadd(k(queue, "schedule"), {ghost: 5})
    [f] = found_then_fixed(run, queue, [("no-row", ghost)])
    assert f.repaired == "removed from schedule"
    assert not raw.exists(k(queue, "schedule"))


def test_a_second_index_of_a_job(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue_in, queue, jid, b"x", 60_000)
    raw.zadd(k(queue, "pending"), {jid: 0})
    [f] = found_then_fixed(run, queue, [("stray", jid)])
    assert f.detail == "state 'scheduled' but also on pending"
    assert raw.zscore(k(queue, "schedule"), jid) is not None


def test_a_wrong_group_active_count(run, raw, queue):
    for _ in range(2):
        run(jobs.enqueue, queue, ids.mint(), b"x", group="acme")
    run(jobs.claim, queue, 60_000)
    raw.hset(keyspace.group_key(queue, "acme"), "active", 5)
    [f] = found_then_fixed(run, queue, [("active-count", "acme")])
    assert f.detail == "active count 5 but 1 of its jobs are on active"
    assert run(groups.stats, queue)["acme"].active == 1


def test_a_missing_ring_entry(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="acme")
    raw.zrem(k(queue, "ring"), "acme")
    assert run(jobs.claim, queue, 1000) is None  # the job is stuck: no ring, no claim
    [f] = found_then_fixed(run, queue, [("ring", "acme")])
    assert f.detail == "ready but not on the ring"
    assert run(jobs.claim, queue, 1000).id == jid


def test_a_ring_entry_of_a_paused_group(run, raw, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x", group="acme")
    run(groups.pause, queue, "acme")
    raw.zadd(k(queue, "ring"), {"acme": 99})
    [f] = found_then_fixed(run, queue, [("ring", "acme")])
    assert f.detail == "on the ring but not ready"


def test_an_active_row_off_active_goes_back_to_the_reaper(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    run(jobs.claim, queue, 60_000)
    raw.zrem(k(queue, "active"), jid)
    found_then_fixed(run, queue, [("missing", jid)])
    assert run(jobs.reap, queue, 10) == 1  # its lease expired now: the reaper returns it
    assert run(jobs.claim, queue, 1000).id == jid


def test_rows_the_queue_cannot_read(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    raw.set(keyspace.job_key(queue, a), "text")
    raw.zadd(k(queue, "pending"), {a: 0})
    raw.hset(keyspace.job_key(queue, b), mapping={"state": "weird", "payload": "x"})
    found_then_fixed(run, queue, [("not-a-hash", a), ("unknown-state", b)])
    assert raw.hget(keyspace.job_key(queue, b), "error") == b"corrupt row: unknown state 'weird'"
    assert raw.get(k(queue, "corrupt:" + a)) == b"text"
    assert run(jobs.counts, queue)["dead"] == 2


def test_a_flow_parent_waiting_for_no_child(run, raw, queue):
    pid = ids.mint()
    raw.hset(keyspace.job_key(queue, pid), mapping={"state": "waiting-children",
                                                   "attempts": "0", "payload": "x", "flow": "1"})
    raw.zadd(k(queue, "waiting-children"), {pid: 1})
    [f] = found_then_fixed(run, queue, [("no-children", pid)])
    assert f.repaired == "released"
    assert run(jobs.claim, queue, 1000).id == pid


def test_a_flow_parent_waiting_for_a_stranger(run, raw, queue):
    pid, kid = ids.mint(), ids.mint()
    raw.hset(keyspace.job_key(queue, pid), mapping={"state": "waiting-children",
                                                   "attempts": "0", "payload": "x", "flow": "1"})
    raw.zadd(k(queue, "waiting-children"), {pid: 1})
    raw.rpush(k(queue, f"kids:{pid}"), keyspace.job_key(queue, kid))
    raw.sadd(k(queue, f"deps:{pid}"), keyspace.job_key(queue, kid), "stranger")
    run(jobs.enqueue, queue, kid, b"x")
    found_then_fixed(run, queue, [("foreign-dep", pid)])
    assert set(raw.smembers(k(queue, f"deps:{pid}"))) == {keyspace.job_key(queue, kid).encode()}


def test_a_flow_parent_whose_child_is_gone(run, raw, queue):
    pid, kid = ids.mint(), ids.mint()
    raw.hset(keyspace.job_key(queue, pid), mapping={"state": "waiting-children",
                                                   "attempts": "0", "payload": "x", "flow": "1"})
    raw.zadd(k(queue, "waiting-children"), {pid: 1})  # admitted long ago (SERVER ms 1)
    raw.rpush(k(queue, f"kids:{pid}"), keyspace.job_key(queue, kid))
    raw.sadd(k(queue, f"deps:{pid}"), keyspace.job_key(queue, kid))
    [f] = run(doctor.check, queue, fix=True)
    assert (f.kind, f.subject, f.repaired) == ("child-gone", pid, "")  # report only


@pytest.mark.parametrize("batch", [1, 3])
def test_small_batches_find_the_same(run, raw, queue, batch):
    made = [ids.mint() for _ in range(7)]
    for jid in made:
        run(jobs.enqueue, queue, jid, b"x")
    raw.zrem(k(queue, "pending"), *made[::2])
    got = run(doctor.check, queue, batch=batch)
    assert kinds(got) == sorted(("missing", j) for j in made[::2])


def test_the_batch_is_guarded(run, queue):
    with pytest.raises(ValueError):
        run(doctor.check, queue, batch=0)


@pytest.mark.slow
@pytest.mark.topologies
def test_the_doctor_reads_one_slot_on_a_cluster_too(url, conn, raw, queue):
    # its SCANs go to the queue's slot owner (a cluster primary holds only its slots)
    jid, ghost = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, jid, b"x", group="acme")
    raw.zrem(keyspace.lane_key(queue, "acme"), jid)
    raw.zadd(k(queue, "pending"), {ghost: 0})
    got = doctor.check(conn, queue, fix=True)
    assert kinds(got) == sorted([("missing", jid), ("no-row", ghost)])
    assert doctor.check(conn, queue) == []
    assert jobs.claim(conn, queue, 1000).id == jid
