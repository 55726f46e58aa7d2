"""Hostile times: the scripts refuse a due that is no finite number or prices a score past
year 9999 (another client's call, past the Python guards), writing nothing; the verbs that
read scores (pages, the dead list, the next due instant) read ``inf``, ``1e300`` and
``-inf`` put there by another client instead of raising."""

from __future__ import annotations

import pytest

from echomq import errors, ids, keyspace
from echomq.core.guards import MAX_TIME_MS
from echomq.core.readings import MIN_SHOWN_MS
from echomq.core.steps import Eval
from echomq.verbs import dead, jobs
from tests.support.clients import snapshot


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


BAD_DUES = [("at", "inf", "a finite number"), ("at", "-inf", "a finite number"),
            ("at", "nan", "a finite number"), ("at", "soon", "a finite number"),
            ("at", "1e300", "at most 253402300799999 (year 9999)"),
            ("at", str(MAX_TIME_MS + 1), "at most 253402300799999 (year 9999)"),
            ("at", "-1e300", "at least -253402300799999"),
            ("in", str(MAX_TIME_MS), "at most 253402300799999 (year 9999)")]


def refused(conn, raw, queue, step: Eval, verb: str, why: str) -> None:
    before = snapshot(raw, queue)
    with pytest.raises(errors.CommandError) as exc:
        conn.execute(step)
    assert str(exc.value) == f"ERR EMQ.{verb} due must be {why}"
    assert snapshot(raw, queue) == before


@pytest.mark.parametrize(("mode", "due", "why"), BAD_DUES)
def test_the_schedule_scripts_refuse_a_due_out_of_bounds(conn, raw, queue, mode, due, why):
    jid = ids.mint()
    row, sched = keyspace.job_key(queue, jid), k(queue, "schedule")
    refused(conn, raw, queue, Eval("schedule", (row, sched), (jid, b"x", mode, due)),
            "SCHEDULE", why)
    refused(conn, raw, queue, Eval("schedule", (row, sched),
                                   (jid, b"x", mode, due, "", "g", "", "", "")), "SCHEDULE", why)
    good = ids.mint()
    refused(conn, raw, queue, Eval("schedule_many", (sched,),
                                   (keyspace.base(queue), good, b"x", "at", 5, jid, b"x", mode,
                                    due)), "SCHEDULE", why)
    refused(conn, raw, queue, Eval("admit_many", (k(queue, "pending"), sched),
                                   (keyspace.base(queue), jid, b"x", mode, due,
                                    "", "", "", "", "")), "SCHEDULE", why)


@pytest.mark.parametrize(("mode", "due", "why"), BAD_DUES)
def test_delay_retry_and_extend_refuse_a_due_out_of_bounds(conn, raw, queue, mode, due, why):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    c = jobs.claim(conn, queue, 60_000)
    row, active = keyspace.job_key(queue, jid), k(queue, "active")
    refused(conn, raw, queue, Eval("delay", (row, active, k(queue, "schedule")),
                                   (jid, str(c.token), mode, due)), "DELAY", why)
    if mode == "in":  # retry and extend take spans: added to SERVER now
        refused(conn, raw, queue, Eval("retry", (row, active, k(queue, "schedule"),
                                                 k(queue, "dead")),
                                       (jid, str(c.token), due, "5", "e")), "RETRY", why)
        refused(conn, raw, queue, Eval("extend", (row, active), (jid, str(c.token), due)),
                "EXTEND", why)


def test_a_due_within_bounds_is_admitted_as_before(conn, raw, queue):
    # the seed's script admits a negative run-at (due at the next promote) and any mode
    # but 'in' as absolute: both still hold
    a, b = ids.mint(), ids.mint()
    sched = k(queue, "schedule")
    assert conn.execute(Eval("schedule", (keyspace.job_key(queue, a), sched),
                             (a, b"x", "at", "-5"))) == 1
    assert conn.execute(Eval("schedule", (keyspace.job_key(queue, b), sched),
                             (b, b"x", "whenever", str(MAX_TIME_MS)))) == 1
    assert raw.zscore(sched, a) == -5 and raw.zscore(sched, b) == MAX_TIME_MS


# -- reads of hostile scores ---------------------------------------------------------------

HOSTILE = [("inf", MAX_TIME_MS), ("1e300", MAX_TIME_MS), ("-inf", MIN_SHOWN_MS),
           ("-1e300", MIN_SHOWN_MS)]


@pytest.mark.parametrize(("score", "shown"), HOSTILE)
def test_pages_and_the_dead_list_read_a_hostile_score(run, raw, queue, score, shown):
    for state in ("scheduled", "dead", "active", "completed", "cancelled"):
        jid = ids.mint()
        raw.hset(keyspace.job_key(queue, jid), mapping={"state": state, "attempts": "1",
                                                       "payload": "x"})
        raw.zadd(k(queue, keyspace_set(state)), {jid: float(score)})
        [entry] = run(jobs.page, queue, state)
        assert entry["id"] == jid and entry["score"] == shown
    [entry] = run(dead.list_dead, queue)
    assert entry["died_at"] == shown


def keyspace_set(state: str) -> str:
    from echomq.core import states
    return states.SET_OF[state]


@pytest.mark.parametrize("score", ["-inf", "-1e300", "inf", "1e300"])
def test_the_next_due_instant_reads_a_hostile_schedule(run, raw, queue, score):
    raw.zadd(k(queue, "schedule"), {ids.mint(): float(score)})
    due = run(jobs.next_due_ms, queue)
    assert isinstance(due, int)
    assert (due <= 0) if score.startswith("-") else (due > 10**12)
