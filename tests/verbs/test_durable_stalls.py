"""A durable job's recorded step is progress: the reaper's poison-pill guard (dead after
more than ``max_stalled`` stalls) counts the stalls since the job's last recorded step, so
a job killed again and again while it moves through its steps is not dead-lettered, and
one that stalls again and again in the same place still is."""

from __future__ import annotations

import time

from echomq.connectors.connector import Connector
from echomq.core import ids
from echomq.verbs import durable, jobs


def stall(conn: Connector, queue: str, jid: str, step: str | None) -> str:
    """Claim the job, record ``step`` (if any), let its lease lapse, reap: its state."""
    claim = jobs.claim(conn, queue, 20)
    assert claim is not None and claim.id == jid
    if step is not None:
        durable.record(conn, queue, jid, claim.token, step, b"1")
    time.sleep(0.03)
    assert jobs.reap(conn, queue, 10, 2) == 1
    return str((jobs.get(conn, queue, jid) or {})["state"])


def test_stalls_count_from_the_last_recorded_step(conn: Connector, queue: str) -> None:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"p")
    # five stalls in all, each after a new step: past max_stalled=2, yet never dead
    assert [stall(conn, queue, jid, f"s{i}") for i in range(5)] == ["pending"] * 5
    # then stalls without progress: dead once more than two follow the last step
    assert stall(conn, queue, jid, None) == "pending"
    assert stall(conn, queue, jid, None) == "dead"
    assert jobs.get(conn, queue, jid)["stalled"] == "7"


def test_a_plain_job_still_dies_after_max_stalled(conn: Connector, queue: str) -> None:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"p")
    assert [stall(conn, queue, jid, None) for _ in range(3)] == ["pending", "pending", "dead"]
