"""Why a job waits (DESIGN §3c: ``jobs.why``, ``app.job(id).waiting_on``): each control that
holds a job, one by one, named with when it lets go; read-only (the keyspace is unchanged);
both connectors and wires, single server and cluster."""

from __future__ import annotations

import pytest

from echomq.core import ids, keyspace
from echomq.verbs import flows, groups, jobs
from echomq.verbs.jobs.holds import span
from tests.support.clients import server_ms

pytestmark = pytest.mark.topologies


def why(run, snap, queue, jid):
    """``jobs.why``, checked to write nothing."""
    before = snap(queue)
    got = run(jobs.why, queue, jid)
    assert snap(queue) == before
    return got


def test_scheduled(run, snap, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue_in, queue, jid, b"x", 4_000)
    got = why(run, snap, queue, jid)
    at = int(raw.zscore(keyspace.queue_key(queue, "schedule"), jid))
    assert got.control == "scheduled" and got.until_ms == at
    assert got.words.startswith("scheduled for ")
    assert got.words.endswith(f"(in {span(at - got.now_ms)})") and 0 < at - got.now_ms <= 4_000


def test_queue_paused_with_and_without_an_end(run, snap, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    run(jobs.pause, queue)
    assert why(run, snap, queue, jid).words == "queue paused (until resumed)"
    until = server_ms(raw) + 3_600_000
    run(jobs.pause, queue, until=until)
    got = why(run, snap, queue, jid)
    assert got.control == "paused" and got.until_ms == until
    assert got.words.startswith("queue paused until ") and got.words.endswith("(in 60 m)")


def test_group_paused(run, snap, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="tenant-7")
    run(groups.pause, queue, "tenant-7")
    assert why(run, snap, queue, jid).words == "group tenant-7 paused (until resumed)"


def test_group_at_its_limit(run, snap, queue):
    run(groups.set_limit, queue, "tenant-7", 2)
    for _ in range(2):
        run(jobs.enqueue, queue, ids.mint(), b"busy", group="tenant-7")
    assert len(run(jobs.claim_many, queue, 60_000, 5)) == 2
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="tenant-7")
    got = why(run, snap, queue, jid)
    assert got.control == "group-limit"
    assert got.words == "group tenant-7 at its limit (2 of 2 running)"


def test_group_rate_window_full(run, snap, queue):
    run(groups.set_rate, queue, "g", 1, 10_000)
    run(jobs.enqueue, queue, ids.mint(), b"first", group="g")
    assert run(jobs.claim, queue, 60_000) is not None
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="g")
    got = why(run, snap, queue, jid)
    assert got.control == "group-rate"
    assert got.words.startswith("group g rate window full (1 per 10.0 s), reopens in ")
    assert got.until_ms > got.now_ms


def test_queue_rate_window_full(run, snap, queue):
    run(jobs.set_rate, queue, 10, 1_000)
    for _ in range(11):
        run(jobs.enqueue, queue, ids.mint(), b"x")
    assert len(run(jobs.claim_many, queue, 60_000, 20)) == 10
    (left,) = run(jobs.page, queue, "pending")
    got = why(run, snap, queue, left["id"])
    assert got.control == "rate"
    assert got.words.startswith("rate window full (10 per 1.0 s), reopens in ")
    assert got.words.endswith(" ms")


def test_queue_rate_limited_by_a_handler(run, snap, queue):
    run(jobs.enqueue, queue, ids.mint(), b"x")
    c = run(jobs.claim, queue, 60_000)
    run(jobs.rate_limited, queue, c.id, c.token, 5_000)
    got = why(run, snap, queue, c.id)
    assert got.control == "blocked" and "reopens in" in got.words


def test_behind_jobs_of_lower_or_equal_priority(run, snap, queue):
    for p in (0, 0, 1, 3):
        run(jobs.enqueue, queue, ids.mint(), b"ahead", priority=p)
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", priority=3)
    run(jobs.enqueue, queue, ids.mint(), b"after", priority=3)
    got = why(run, snap, queue, jid)
    assert got.control == "behind" and got.facts["n"] == 4
    assert got.words == "behind 4 jobs of priority <= 3"
    first = run(jobs.page, queue, "pending")[0]["id"]
    assert why(run, snap, queue, first).words.startswith("next in line")


def test_behind_in_a_group_lane(run, snap, queue):
    run(jobs.enqueue, queue, ids.mint(), b"ahead", group="g")
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x", group="g")
    assert why(run, snap, queue, jid).words == "behind 1 job of priority <= 0 in group g"


def test_waiting_for_children(run, snap, queue):
    parent = ids.mint()
    kids = tuple(flows.Node(queue, ids.mint(), b"c") for _ in range(3))
    run(flows.admit, flows.Node(queue, parent, b"p", children=kids))
    c = run(jobs.claim, queue, 60_000)
    run(jobs.ack, queue, c.id, c.token)
    run(flows.carry, queue, 100)
    got = why(run, snap, queue, parent)
    assert got.control == "children"
    assert got.words == "waiting for 2 of 3 children"


def test_a_deadline_is_named(run, snap, queue):
    jid = ids.mint()
    run(jobs.admit, queue, jid, b"x", mode="in", value=60_000, expires_ms=120_000)
    words = why(run, snap, queue, jid).words
    assert words.startswith("scheduled for ") and words.endswith("; expires in 2 m")


def test_running_and_ended_jobs_have_no_hold(run, snap, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    got = why(run, snap, queue, jid)
    assert got.state == "active" and got.control is None and got.words is None
    assert got.lease_ms is not None and got.lease_ms > got.now_ms
    run(jobs.retry, queue, jid, c.token, 0, 1, "boom")
    assert why(run, snap, queue, jid).state == "dead"
    assert why(run, snap, queue, ids.mint()).state is None


def test_app_job_says_what_holds_it(app, queue):
    @app.task(queue=queue)
    def work(x): ...

    jid = work.enqueue_in(60_000, 1)
    assert app.job(jid).waiting_on.startswith("scheduled for ")
    jobs.pause(app.connector(), queue)
    jid = work.enqueue(2)
    assert app.job(jid).waiting_on == "queue paused (until resumed)"


def test_a_hostile_run_at_reads_without_raising(run, snap, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue_in, queue, jid, b"x", 60_000)
    raw.zadd(keyspace.queue_key(queue, "schedule"), {jid: float("inf")})
    assert why(run, snap, queue, jid).words.startswith("scheduled for ")
    raw.zadd(keyspace.queue_key(queue, "schedule"), {jid: 1e300})
    words = why(run, snap, queue, jid).words
    # clamped like the run-at line (year 9999), not a 300-digit number of ms and days
    assert words.startswith("scheduled for 9999-12-31 23:59:59 UTC (in "), words
    assert len(words) < 60, words
