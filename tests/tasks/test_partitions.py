"""Partitioned queues on a real cluster: ``@app.task(queue="mail", partitions=8)`` spreads
the queue over ``mail#0`` ... ``mail#7`` (each its own hash tag, so over several primaries);
a partition key always picks the same partition (per-key order holds), no key goes round
robin; a worker serves every partition fairly; stats show the queue as one row. And a key
built outside its queue's tag is caught: by the verbs' own keys (checked on every step) and
by the connector (a CrossSlotError, never retried as weather)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time

import pytest

from echomq import Connector
from echomq.core import errors, ids, keyspace, partitions
from echomq.core.steps import Batch, Eval, Native
from echomq.tasks.app import App
from echomq.tasks.worker import Worker
from echomq.verbs import jobs, repeat, workers
from tests.support.polling import wait_for
from tests.support.workers import run_until, serving


def test_names_keys_and_folding_are_pure_and_stable():
    assert partitions.names("mail", 3) == ["mail#0", "mail#1", "mail#2"]
    assert partitions.names("mail", 1) == ["mail"]
    assert partitions.split("mail#12") == ("mail", 12)
    assert partitions.split("mail") == ("mail", None)
    assert partitions.split("a#b") == ("a#b", None)
    # CRC-32: the same in every process (no PYTHONHASHSEED), pinned here
    assert [partitions.key_index(k, 8) for k in ("user-1", "user-2", b"user-1", 42)] == [
        partitions.key_index("user-1", 8), partitions.key_index("user-2", 8),
        partitions.key_index("user-1", 8), partitions.key_index("42", 8)]
    assert partitions.key_index("user-1", 8) == 2_116_437_524 % 8  # zlib.crc32(b"user-1")
    assert partitions.fold(["b", "mail#1", "mail#0", "a#x"]) == {
        "a#x": ["a#x"], "b": ["b"], "mail": ["mail#0", "mail#1"]}
    assert partitions.sum_counts([{"pending": 1, "dead": 2}, {"pending": 3}]) == {
        "pending": 4, "dead": 2}
    for bad, exc in ((0, ValueError), (1025, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(exc):
            partitions.validate("mail", bad)
    with pytest.raises(ValueError):
        partitions.validate("mail#3", 2)  # would read as a partition of "mail"
    with pytest.raises(TypeError):
        partitions.key_index(["no"], 4)  # type: ignore[arg-type]


def test_app_refuses_bad_partitioning_before_any_io():
    app = App("valkey://127.0.0.1:1/0")  # never contacted
    app.task(lambda: None, queue="mail", name="a", partitions=4)
    with pytest.raises(ValueError, match="partition"):
        app.task(lambda: None, queue="mail", name="b", partitions=2)
    with pytest.raises(ValueError):
        app.task(lambda: None, queue="x", name="c", partitions=0)
    with pytest.raises(TypeError):
        app.tasks["a"].options(partition_key=1.5)  # type: ignore[arg-type]
    assert app.queues() == ["mail#0", "mail#1", "mail#2", "mail#3"]
    assert app.expand(["mail", "other"]) == ["mail#0", "mail#1", "mail#2", "mail#3", "other"]


@pytest.fixture
def app(cluster):
    a = App(cluster.url, keep_completed=100_000)
    yield a
    a.close()


def test_partitions_spread_keys_stick_and_no_key_goes_round_robin(cluster, app):
    base = "pmail" + ids.mint()[-6:]
    send = app.task(lambda to: None, queue=base, name=f"{base}.send", partitions=8)
    conn = app.connector()
    owners = {cluster.owner(keyspace.queue_key(q, "pending")).port for q in send.queues}
    assert len(owners) == 3  # 8 tags over 3 primaries
    for i in range(16):
        send.enqueue(i)
    assert [jobs.counts(conn, q)["pending"] for q in send.queues] == [2] * 8
    keyed = [send.options(partition_key="user-42").enqueue(i) for i in range(5)]
    home = send.queues[partitions.key_index("user-42", 8)]
    assert jobs.counts(conn, home)["pending"] == 2 + 5
    # per-key order: the key's jobs wait in mint order on their one partition
    pending = [m.decode() for m in conn.call("ZRANGE", keyspace.queue_key(home, "pending"),
                                              0, -1)]
    assert [j for j in pending if j in keyed] == keyed
    assert app.job(keyed[0]).queue == home


def test_a_worker_drains_every_partition_fairly(cluster, app):
    base = "pfair" + ids.mint()[-6:]
    ran: list[tuple[str, float]] = []

    async def work(n: int) -> None:
        from echomq.runtime.handler import current_job

        job = current_job()
        assert job is not None
        await asyncio.sleep(0.002)
        ran.append((job.queue, time.monotonic()))

    task = app.task(work, queue=base, name=f"{base}.work", partitions=4)
    hot = task.queues[0]
    conn = app.connector()
    jobs.enqueue_many(conn, hot, [(ids.mint(), task.payload(i)) for i in range(400)])
    for q in task.queues[1:]:
        jobs.enqueue_many(conn, q, [(ids.mint(), task.payload(i)) for i in range(20)])

    async def main() -> None:
        worker = Worker(app, [base], concurrency=4, beat_ms=50)
        await run_until(worker, lambda: len(ran) >= 460, 30)
        # one consumer, one pool of 4 slots, for the four partitions
        assert [(c.queue, c.queues) for c in worker.consumers] == [(base, task.queues)]
        assert sorted(worker.metronome.queues) == sorted(task.queues)  # type: ignore[union-attr]

    asyncio.run(main())
    assert collections.Counter(q for q, _ in ran) == {
        task.queues[0]: 400, task.queues[1]: 20, task.queues[2]: 20, task.queues[3]: 20}
    # fair: the cold partitions were not queued behind the hot one's 400 jobs
    hot_done = max(t for q, t in ran if q == hot)
    assert all(max(t for q, t in ran if q == cold) < hot_done for cold in task.queues[1:])


def test_a_worker_counts_a_partitioned_queue_as_one_pool_of_slots(cluster, app):
    base, other = "pslots" + ids.mint()[-6:], "pother" + ids.mint()[-6:]
    task = app.task(lambda: None, queue=base, name=f"{base}.noop", partitions=3)
    app.task(lambda: None, queue=other, name=f"{other}.noop")
    conn = app.connector()
    with serving(app, [base, other], concurrency=4) as worker:
        wait_for(lambda: any(w.id == worker.id for w in workers.live(conn)), 10,
                 "the worker's registration")
        [mine] = [w for w in workers.live(conn) if w.id == worker.id]
    # two pools of 4 (the three partitions share one), not 4 per partition
    assert sorted(mine.queues) == sorted([*task.queues, other])
    assert mine.slots == 8 and mine.as_dict()["slots"] == 8


def test_stats_show_a_partitioned_queue_as_one_row(cluster, app):
    base = "pstat" + ids.mint()[-6:]
    t = app.task(lambda: None, queue=base, name=f"{base}.t", partitions=3)
    for _ in range(7):
        t.enqueue()
    env = {**os.environ, "ECHOMQ_URL": cluster.url}
    done = subprocess.run([sys.executable, "-m", "echomq.cli", "stats", "--json"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert table[base]["pending"] == 7 and table[base]["partitions"] == 3
    assert not any(q.startswith(base + "#") for q in table)


def test_recurrence_of_a_partitioned_task_lives_on_its_first_partition(cluster, app):
    base = "prep" + ids.mint()[-6:]
    t = app.task(lambda: None, queue=base, name=f"{base}.t", partitions=2)
    app.every(60_000, name="tick")(t)
    assert [r.queue for r in app.recurrences if r.name == "tick"] == [t.queues[0]]


# -- a key built outside its queue's tag is caught ---------------------------------------


class TagChecked(Connector):
    """A real cluster connector that, before sending, checks every script and module call
    keeps its keys (and key-shaped arguments) under one queue's hash tag."""

    seen: collections.Counter[str]

    def execute(self, step):  # type: ignore[no-untyped-def]
        for s in step.steps if isinstance(step, Batch) else (step,):
            if isinstance(s, (Eval, Native)):
                name = s.script if isinstance(s, Eval) else s.command
                tags = {k.split("}", 1)[0] for k in s.keys}
                tags |= {a.split("}", 1)[0] for a in s.args
                         if isinstance(a, str) and a.startswith("emq:{")}
                assert len(tags) == 1 and all(k.startswith("emq:{") for k in s.keys), (
                    f"{name} touches keys outside one queue tag: {s.keys} {s.args}")
                self.seen[name] += 1
        return super().execute(step)


def test_every_transition_keeps_its_keys_in_the_queue_tag(cluster):
    conn = TagChecked.connect(cluster.url)
    conn.seen = collections.Counter()
    q = "tagged" + ids.mint()[-6:]
    a, b, c = ids.mint(), ids.mint(), ids.mint()
    jobs.enqueue(conn, q, a, b"x")
    jobs.enqueue_in(conn, q, b, b"y", 0)
    jobs.enqueue_many(conn, q, [(c, b"z")])
    jobs.schedule_many(conn, q, [(ids.mint(), b"s", "in", 60_000)])
    jobs.promote(conn, q, 10)
    first = jobs.claim(conn, q, 30_000)
    more = jobs.claim_many(conn, q, 30_000, 2)
    assert first is not None and len(more) == 2
    jobs.extend(conn, q, first.id, first.token, 30_000)
    jobs.ack(conn, q, first.id, first.token)
    jobs.retry(conn, q, more[0].id, more[0].token, 0, 1, "boom")
    jobs.delay(conn, q, more[1].id, more[1].token, 0)
    jobs.reap(conn, q, 10)
    repeat.register(conn, q, "r", 60_000, b"t")
    repeat.advance(conn, q, "r", 60_000)
    repeat.sweep(conn, q, None, 10)
    jobs.counts(conn, q)
    conn.close()
    assert {"enqueue", "schedule", "promote", "claim", "ack", "retry", "delay", "reap",
            "extend", "register", "advance"} <= set(conn.seen)


def test_a_key_outside_the_tag_is_a_cross_slot_error_not_weather(cluster):
    conn = Connector.connect(cluster.url)
    q1, q2 = "xs-a", "xs-b"
    wrong = Eval("enqueue", (keyspace.job_key(q1, ids.mint()), keyspace.queue_key(q2, "pending")),
                 (ids.mint(), b"x"))
    with pytest.raises(errors.CrossSlotError) as caught:
        conn.execute(wrong)
    assert not isinstance(caught.value, errors.WireError)  # the runtime never retries it
    # sent straight to one node, the server's own CROSSSLOT refusal maps the same way
    node = cluster.owner(keyspace.queue_key(q1, "pending"))
    direct = Connector.connect(f"valkey://:{cluster.password}@{node.host}:{node.port}/0")
    with pytest.raises(errors.CrossSlotError):
        direct.call("MGET", keyspace.queue_key(q1, "pending"), keyspace.queue_key("zz", "x"))
    direct.close()
    conn.close()


def test_the_dashboard_shows_a_partitioned_queue_as_one_row(cluster, app):
    import http.client
    import re

    from echomq import dashboard

    base = "pdash" + ids.mint()[-6:]
    t = app.task(lambda: None, queue=base, name=f"{base}.t", partitions=4)
    for _ in range(10):
        t.enqueue()
    httpd = dashboard.serve(app.connector(), port=0)  # discovers every primary's queues
    try:
        port = httpd.server_address[1]
        http_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        http_conn.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
        page = http_conn.getresponse().read().decode()
        http_conn.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    row = re.search(rf"<tr class='partitioned' data-queue='{base}'>(.*?)</tr>", page, re.S)
    assert row is not None and "4 partitions" in row.group(1)
    # pending summed over the partitions, linked to the folded page
    assert f"href='/q/{base}?state=pending'>10</a></td>" in row.group(1)


def test_cli_enqueue_of_a_partitioned_task_lands_on_a_partition(cluster, tmp_path):
    base = "pcli" + ids.mint()[-6:]
    (tmp_path / "papp.py").write_text(
        "from echomq.tasks.app import App\napp = App()\n"
        f"@app.task(queue={base!r}, name='send', partitions=4)\ndef send(to): pass\n")
    env = {**os.environ, "ECHOMQ_URL": cluster.url, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "echomq.cli", "enqueue", "send", "a@b.c",
                           "--app", "papp:app"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job_id, outcome, queue = done.stdout.split()
    assert outcome == "enqueued" and partitions.split(queue)[0] == base
    conn = Connector.connect(cluster.url)
    assert jobs.get(conn, queue, job_id) is not None
    conn.close()
