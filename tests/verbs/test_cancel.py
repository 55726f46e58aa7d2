"""Cancel, pause and the server counters (DESIGN §3b), key by key, on both connectors/wires."""

from __future__ import annotations

import threading

import pytest

from echomq import Connector
from echomq.core import errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.verbs import jobs, retention
from tests.support.clients import server_ms


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def row(raw, queue, jid):
    return raw.hgetall(keyspace.job_key(queue, jid))


def where(raw, queue, jid, lanes: list[bytes] | None = None) -> list[str]:
    """Every state set (and lane) holding ``jid``; ``lanes``: the queue's lanes, scanned
    once by a caller that asks for many jobs (a SCAN walks the whole shared keyspace)."""
    sets = ["pending", "schedule", "active", "dead", "completed", "cancelled"]
    found = [s for s in sets if raw.zscore(k(queue, s), jid) is not None]
    if lanes is None:
        lanes = list(raw.scan_iter(match=f"emq:{{{queue}}}:g:*:pending"))
    for lane in lanes:
        if raw.zscore(lane, jid) is not None:
            found.append(lane.decode())
    return found


@pytest.mark.parametrize("how", ["pending", "lane", "scheduled"])
def test_cancel_of_a_waiting_job_ends_it_at_once(run, raw, queue, how):
    jid, other = ids.mint(), ids.mint()
    if how == "pending":
        run(jobs.enqueue, queue, jid, b"x", priority=3)
    elif how == "lane":
        run(jobs.enqueue, queue, jid, b"x", group="g")
    else:
        run(jobs.enqueue_in, queue, jid, b"x", 60_000)
    run(jobs.enqueue, queue, other, b"y")
    before = server_ms(raw)
    assert run(jobs.cancel, queue, jid) == Outcome.CANCELLED
    r = row(raw, queue, jid)
    assert r[b"state"] == b"cancelled" and b"cancel" not in r
    assert before <= int(r[b"cancelled_at"]) <= server_ms(raw)
    assert where(raw, queue, jid) == ["cancelled"]
    assert raw.zscore(k(queue, "cancelled"), jid) == int(r[b"cancelled_at"])
    assert run(jobs.counts, queue)["cancelled"] == 1
    assert run(jobs.stats, queue)["cancelled"] == 1
    # the claim never sees it; the other job is untouched
    assert run(jobs.claim, queue, 1000).id == other
    assert run(jobs.claim, queue, 1000) is None


def test_cancel_of_an_active_job_is_a_request_its_holder_learns(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    assert run(jobs.checkpoint, queue, jid, c.token, 60_000).cancelled is False
    assert run(jobs.cancel, queue, jid) == Outcome.REQUESTED
    assert run(jobs.cancel, queue, jid) == Outcome.REQUESTED  # idempotent
    assert row(raw, queue, jid)[b"cancel"] == b"1"
    assert where(raw, queue, jid) == ["active"]
    before = server_ms(raw)
    cp = run(jobs.checkpoint, queue, jid, c.token, 30_000)
    assert cp.cancelled is True and cp.expires_ms >= before + 30_000
    assert raw.zscore(k(queue, "active"), jid) == cp.expires_ms
    assert isinstance(run(jobs.extend, queue, jid, c.token, 30_000), int)
    assert run(jobs.finish_cancelled, queue, jid, c.token) is None
    assert row(raw, queue, jid)[b"state"] == b"cancelled"
    assert where(raw, queue, jid) == ["cancelled"]
    assert run(jobs.cancel, queue, jid) == Outcome.ABSENT


def test_finish_cancelled_refusals_write_nothing(run, queue, snap):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    before = snap(queue)
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE finish_cancelled token mismatch$"):
        run(jobs.finish_cancelled, queue, jid, c.token + 1)
    with pytest.raises(errors.GoneError, match=r"^EMQSTALE job gone$"):
        run(jobs.finish_cancelled, queue, ids.mint(), 1)
    with pytest.raises(errors.KindError):
        run(jobs.finish_cancelled, queue, "X", 1)
    assert snap(queue) == before
    run(jobs.ack, queue, jid, c.token)
    with pytest.raises(errors.StateError, match=r"^EMQSTATE finish_cancelled not active$"):
        run(jobs.finish_cancelled, queue, jid, c.token)


def test_cancel_of_finished_or_unknown_ids_is_absent_and_writes_nothing(run, queue, snap):
    done, died = ids.mint(), ids.mint()
    run(jobs.enqueue_many, queue, [(done, b"x"), (died, b"y")])
    a, b = run(jobs.claim_many, queue, 60_000, 2)
    run(jobs.ack, queue, a.id, a.token)
    run(jobs.retry, queue, b.id, b.token, 0, 1, "boom")
    before = snap(queue)
    for jid in (done, died, ids.mint()):
        assert run(jobs.cancel, queue, jid) == Outcome.ABSENT
    with pytest.raises(errors.KindError, match=r"^EMQKIND job id must be JOB-namespaced$"):
        run(jobs.cancel, queue, "nope")
    with pytest.raises(TypeError):
        run(jobs.cancel, queue, 5)
    assert snap(queue) == before


def test_retry_and_reap_end_a_cancel_requested_job_cancelled(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    run(jobs.enqueue_many, queue, [(a, b"x"), (b, b"y")])
    ca, _ = run(jobs.claim_many, queue, 60_000, 2)
    assert run(jobs.cancel, queue, a) == "requested"
    assert run(jobs.cancel, queue, b) == "requested"
    assert run(jobs.retry, queue, a, ca.token, 0, 5, "stopped") == Outcome.CANCELLED
    assert where(raw, queue, a) == ["cancelled"]
    assert row(raw, queue, a)[b"error"] == b"stopped"
    raw.zadd(k(queue, "active"), {b: 1})
    assert run(jobs.reap, queue, 10) == 1
    assert where(raw, queue, b) == ["cancelled"]
    assert row(raw, queue, b)[b"state"] == b"cancelled"
    assert run(jobs.stats, queue)["cancelled"] == 2


def test_an_ack_that_lands_first_completes(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    assert run(jobs.cancel, queue, jid) == "requested"
    run(jobs.ack, queue, jid, c.token)
    assert where(raw, queue, jid) == ["completed"]
    assert row(raw, queue, jid)[b"state"] == b"completed"
    assert b"cancel" not in row(raw, queue, jid)


def test_a_marked_job_sent_back_to_wait_ends_cancelled_at_its_claim(run, raw, queue):
    jid, nxt = ids.mint(), ids.mint()
    run(jobs.enqueue, queue, jid, b"x")
    c = run(jobs.claim, queue, 60_000)
    assert run(jobs.cancel, queue, jid) == "requested"
    run(jobs.delay, queue, jid, c.token, 0)   # the holder delayed before it saw the request
    run(jobs.enqueue, queue, nxt, b"y")
    run(jobs.promote, queue, 10)
    assert run(jobs.claim, queue, 1000).id == nxt
    assert where(raw, queue, jid) == ["cancelled"]


@pytest.mark.slow
def test_cancel_races_ack_and_exactly_one_wins(url, raw, queue):
    n = 300
    minted = [ids.mint() for _ in range(n)]
    setup = Connector.connect(url)
    jobs.enqueue_many(setup, queue, [(j, b"x") for j in minted])
    held = {c.id: c.token for c in jobs.claim_many(setup, queue, 600_000, n)}
    assert len(held) == n
    outcomes: dict[str, str] = {}
    acked: dict[str, bool] = {}
    go = threading.Barrier(2)

    def canceller() -> None:
        conn = Connector.connect(url)
        go.wait()
        for jid in minted:
            outcomes[jid] = jobs.cancel(conn, queue, jid)
        conn.close()

    def holder() -> None:
        conn = Connector.connect(url)
        go.wait()
        for jid in reversed(minted):  # the two threads meet midway: some of each outcome
            try:
                # what a holder does: a checkpoint that sees the request stops the handler
                if jobs.checkpoint(conn, queue, jid, held[jid], 600_000).cancelled:
                    jobs.finish_cancelled(conn, queue, jid, held[jid])
                    acked[jid] = False
                else:
                    jobs.ack(conn, queue, jid, held[jid])
                    acked[jid] = True
            except errors.StateError:
                acked[jid] = False
        conn.close()

    threads = [threading.Thread(target=canceller), threading.Thread(target=holder)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ends = {"completed": 0, "cancelled": 0}
    lanes = list(raw.scan_iter(match=f"emq:{{{queue}}}:g:*:pending"))
    for jid in minted:
        state = raw.hget(keyspace.job_key(queue, jid), "state").decode()
        assert where(raw, queue, jid, lanes) == [state]
        ends[state] += 1
        if state == "completed":
            assert acked[jid] is True and outcomes[jid] in ("requested", "absent")
        else:
            assert acked[jid] is False and outcomes[jid] == "requested"
    assert ends["completed"] + ends["cancelled"] == n
    counters = jobs.stats(setup, queue)
    assert counters["completed"] == ends["completed"]
    assert counters["cancelled"] == ends["cancelled"]
    setup.close()


def test_pause_stops_claims_but_not_admission_or_promote(run, raw, queue):
    a, b = ids.mint(), ids.mint()
    assert run(jobs.is_paused, queue) is False
    assert run(jobs.pause, queue) is True
    assert run(jobs.pause, queue) is False
    assert raw.get(k(queue, "paused")) == b"1"
    assert run(jobs.is_paused, queue) is True
    run(jobs.enqueue, queue, a, b"x")
    run(jobs.enqueue_at, queue, b, b"y", 0)
    assert run(jobs.promote, queue, 10) == 1
    assert run(jobs.claim, queue, 1000) is None
    assert run(jobs.claim_many, queue, 1000, 5) == []
    assert raw.zcard(k(queue, "pending")) == 2
    raw.delete(k(queue, "wake"))
    assert run(jobs.resume, queue) is True
    assert raw.lrange(k(queue, "wake"), 0, -1) == [b"1"]
    assert not raw.exists(k(queue, "paused"))
    assert [c.id for c in run(jobs.claim_many, queue, 1000, 5)] == [a, b]


def test_stats_count_every_transition(run, raw, queue):
    assert run(jobs.stats, queue) == dict.fromkeys(jobs.STAT_NAMES, 0)
    minted = [ids.mint() for _ in range(4)]
    run(jobs.enqueue, queue, minted[0], b"x")
    run(jobs.enqueue_many, queue, [(minted[1], b"x"), (minted[2], b"x")])
    run(jobs.schedule_many, queue, [(minted[3], b"x", "at", 0)])
    run(jobs.enqueue, queue, minted[0], b"x")  # a duplicate is not counted
    run(jobs.promote, queue, 10)
    c = run(jobs.claim_many, queue, 60_000, 4)
    run(jobs.ack, queue, c[0].id, c[0].token)
    run(jobs.ack_many, queue, [(c[1].id, c[1].token)])
    run(jobs.retry, queue, c[2].id, c[2].token, 0, 5, "e")
    run(jobs.retry, queue, c[3].id, c[3].token, 0, 1, "e")
    assert run(jobs.stats, queue) == {"enqueued": 4, "completed": 2, "failed": 2,
                                      "retried": 1, "dead": 1, "cancelled": 0}


def test_retention_trims_the_cancelled_set_like_dead(conn, raw, queue):
    minted = [ids.mint() for _ in range(5)]
    jobs.enqueue_many(conn, queue, [(j, b"x") for j in minted])
    for jid in minted:
        assert jobs.cancel(conn, queue, jid) == "cancelled"
    assert retention.trim(conn, queue, "cancelled", 2, None) == 3
    assert raw.zcard(k(queue, "cancelled")) == 2
    for jid in minted[:3]:
        assert not raw.exists(keyspace.job_key(queue, jid))
    with pytest.raises(ValueError):
        retention.trim(conn, queue, "nope", 2, None)


def test_cancelled_page_is_newest_first(conn, queue):
    a, b = ids.mint(), ids.mint()
    jobs.enqueue_many(conn, queue, [(a, b"x"), (b, b"y")])
    jobs.cancel(conn, queue, a)
    jobs.cancel(conn, queue, b)
    page = jobs.page(conn, queue, "cancelled")
    assert {p["id"] for p in page} == {a, b}
    assert all(p["state"] == "cancelled" for p in page)
    assert page[0]["score"] >= page[1]["score"]


def test_cancel_many_answers_in_order_in_one_trip(run, raw, queue, snap):
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    run(jobs.enqueue, queue, a, b"x")
    run(jobs.enqueue_in, queue, b, b"y", 60_000)
    assert run(jobs.cancel_many, queue, [a, b, c]) == ["cancelled", "cancelled", "absent"]
    assert run(jobs.counts, queue)["cancelled"] == 2
    before = snap(queue)
    with pytest.raises(errors.KindError):
        run(jobs.cancel_many, queue, [ids.mint(), "BAD"])
    assert snap(queue) == before
    assert run(jobs.cancel_many, queue, []) == []
