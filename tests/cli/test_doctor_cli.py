"""``echomq doctor [QUEUE] [--fix]`` as a user runs it: exit 0 when every invariant holds,
1 with findings (each a line, each repair printed under it), 2 for bad arguments; and on a
queue a worker has just run 10,000 mixed jobs through, nothing to report."""

from __future__ import annotations

import json
import random

import pytest

from echomq import ids, keyspace
from echomq.tasks.app import App
from echomq.verbs import doctor, groups, jobs
from tests.support.cli import echomq
from tests.support.polling import wait_for
from tests.support.workers import serving


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def test_doctor_reports_repairs_and_exits_by_what_it_found(url, conn, raw, queue):
    missing, ghost = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, missing, b"x")
    jobs.enqueue(conn, queue, ids.mint(), b"x", group="acme")
    raw.zrem(k(queue, "pending"), missing)
    raw.zadd(k(queue, "pending"), {ghost: 0})
    raw.zrem(k(queue, "ring"), "acme")

    done = echomq("doctor", queue, url=url)
    assert done.returncode == 1, done.stderr
    assert f"{queue}  missing  {missing}: state 'pending' but not on pending" in done.stdout
    assert f"{queue}  no-row  {ghost}: an entry on pending with no row" in done.stdout
    assert f"{queue}  ring  acme: ready but not on the ring" in done.stdout
    assert "3 findings (--fix repairs what it can)" in done.stdout and "repaired" not in done.stdout

    done = echomq("doctor", queue, "--fix", url=url)
    assert done.returncode == 1 and "3 findings, 3 repaired" in done.stdout
    assert "  repaired: put back on pending" in done.stdout
    assert "  repaired: removed from pending" in done.stdout
    assert "  repaired: put on the ring" in done.stdout

    done = echomq("doctor", queue, url=url)
    assert done.returncode == 0 and f"{queue}: every invariant holds" in done.stdout
    done = echomq("doctor", queue, "--json", url=url)
    assert done.returncode == 0 and done.stdout == ""


def test_doctor_json_lines(url, conn, raw, queue):
    raw.hset(keyspace.group_key(queue, "g"), "active", 3)
    raw.sadd(k(queue, "groups"), "g")
    done = echomq("doctor", queue, "--json", url=url)
    assert done.returncode == 1
    [line] = done.stdout.splitlines()
    assert json.loads(line) == {"queue": queue, "kind": "active-count", "subject": "g",
                                "detail": "active count 3 but 0 of its jobs are on active",
                                "repaired": None}


@pytest.mark.parametrize("argv", [["bad{q}"], ["q", "--batch", "0"]])
def test_doctor_refuses_bad_arguments_in_words(url, argv):
    done = echomq("doctor", *argv, url=url)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("echomq: ")


MIXED = 10_000


@pytest.mark.slow
def test_a_queue_after_ten_thousand_mixed_jobs_is_clean(url, conn, queue):
    """Groups with limits, priorities, failures to the dead set, retries, self-delays,
    cancels, jobs still scheduled: checked while the worker runs and once it is done."""
    app = App(url)
    seen: dict[str, int] = {}

    @app.task(queue=queue, max_attempts=2, backoff=("fixed", 1), lease_ms=30_000)
    def work(n: int, kind: str) -> int:
        from echomq import Delay, current_job

        if kind == "fail":
            raise RuntimeError("boom")
        if kind == "flaky" and current_job().attempts == 1:
            raise RuntimeError("once")
        if kind == "delay" and seen.setdefault(current_job().id, 0) == 0:
            seen[current_job().id] = 1
            raise Delay(1)
        return n

    rng = random.Random(24)
    kinds = ["ok"] * 6 + ["fail", "flaky", "delay"]
    groups.set_limit(conn, queue, "g1", 2)
    admitted: list[str] = []
    later: set[str] = set()
    for i in range(MIXED):
        kind = rng.choice(kinds)
        t = work.options(group=rng.choice([None, None, "g1", "g2", "g3"]),
                         priority=rng.choice([0, 0, 0, 5]))
        if i % 50 == 0:
            jid = t.enqueue_in(3_600_000, i, kind)  # still scheduled at the end
            later.add(jid)
        else:
            jid = t.enqueue(i, kind)
        admitted.append(jid)
    for jid in admitted[1::97]:
        jobs.cancel(conn, queue, jid)
        later.discard(jid)

    with serving(app, [queue], concurrency=32):
        def ended() -> int:
            stats = jobs.stats(conn, queue)
            return stats["completed"] + stats["dead"] + stats["cancelled"]

        wait_for(lambda: ended() > MIXED // 3, 120, "a third run")
        assert doctor.check(conn, queue) == []  # live: jobs move while it reads
        wait_for(lambda: sum(jobs.counts(conn, queue)[s] for s in ("pending", "active"))
                 == 0 and all(g.waiting == 0 and g.active == 0
                              for g in groups.stats(conn, queue).values()), 300, "drained")
    app.close()
    counts = jobs.counts(conn, queue)
    assert counts["scheduled"] == len(later) and counts["dead"] > 0
    done = echomq("doctor", queue, url=url, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{queue}: every invariant holds" in done.stdout
