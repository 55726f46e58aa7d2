"""A revived dead job gets a fresh budget: ``revive`` zeroes ``delays`` with ``attempts``
and ``stalled`` (the budget is attempts less delays: delays left on the row would have
given the revived job extra attempts)."""

from __future__ import annotations

from echomq.core import ids, keyspace
from echomq.verbs import dead, jobs


def test_revive_zeroes_the_delays_with_the_attempts(run, raw, queue):
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, b"p")
    for _ in range(2):  # two runs that delayed themselves
        claim = run(jobs.claim, queue, 30_000)
        run(jobs.delay, queue, jid, claim.token, 0)
        run(jobs.count_delay, queue, jid)
        run(jobs.promote, queue, 10)
    claim = run(jobs.claim, queue, 30_000)
    assert run(jobs.retry, queue, jid, claim.token, 0, 1 + 2, "boom") == "dead"
    assert run(jobs.tally, queue, jid) == (3, 1, 2, 0)
    run(dead.revive, queue, jid)
    row = raw.hgetall(keyspace.job_key(queue, jid))
    assert (row[b"attempts"], row[b"delays"], row[b"failures"]) == (b"0", b"0", b"1")
