"""The CLI across queues, as a user runs it (``echomq`` subprocesses, no ``--queue``):
``job``, ``dead list``, ``dead retry``, ``repeat list`` and ``stats`` find every queue,
through the registry (``emq:queues``) without a keyspace scan when the queue is registered,
by a scan when it is not; refusals in plain words."""

from __future__ import annotations

import json

import pytest
import valkey

from echomq.core import ids, keyspace
from echomq.core.payload import encode
from echomq.verbs import jobs, registry, repeat
from tests.support.cli import echomq


def scans(raw) -> int:
    return int(raw.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))


def dead_job(conn, queue: str, error: str) -> str:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("t", [1]))
    c = jobs.claim(conn, queue, 10_000)
    assert jobs.retry(conn, queue, c.id, c.token, 0, 1, error) == "dead"
    return jid


def test_job_is_found_on_its_queue_through_the_registry(app, url, raw, queue):
    @app.task(queue=f"{queue}-mail", name="send")
    def send(to: str) -> None: ...

    jid = send.enqueue_in(3_600_000, "a@b.c")
    assert raw.sismember(keyspace.registry_key(), f"{queue}-mail")
    before = scans(raw)
    done = echomq("job", jid, url=url)
    assert done.returncode == 0, done.stderr
    assert f"queue     {queue}-mail" in done.stdout and "state     scheduled" in done.stdout
    assert scans(raw) == before  # a registered queue: found without a keyspace scan


def test_an_unregistered_queue_is_found_by_a_scan(conn, url, raw, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"raw")  # the low-level verb registers nothing
    assert not raw.sismember(keyspace.registry_key(), queue)
    done = echomq("job", jid, url=url)
    assert done.returncode == 0 and f"queue     {queue}" in done.stdout


@pytest.mark.slow
def test_unknown_and_malformed_ids_are_refused_in_words(url):
    done = echomq("job", ids.mint(), url=url)
    assert done.returncode == 1 and "on any queue" in done.stderr
    done = echomq("job", "notanid", url=url)
    assert done.returncode != 0 and "is not a job id" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_dead_list_and_retry_across_queues(conn, url, raw, queue):
    a = dead_job(conn, f"{queue}-a", "ValueError: boom a")
    b = dead_job(conn, f"{queue}-b", "ValueError: boom b")
    listed = echomq("dead", "list", "--limit", "10000", url=url)
    assert listed.returncode == 0, listed.stderr
    lines = {ln.split()[0]: ln for ln in listed.stdout.splitlines()}
    assert f"{queue}-a" in lines[a] and "boom a" in lines[a]
    assert f"{queue}-b" in lines[b] and "boom b" in lines[b]
    as_json = echomq("dead", "list", "--json", "--limit", "10000", url=url)
    rows = {r["id"]: r for r in map(json.loads, as_json.stdout.splitlines())}
    assert rows[b]["queue"] == f"{queue}-b"

    done = echomq("dead", "retry", b, url=url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{b} revived on {queue}-b"
    assert raw.hget(keyspace.job_key(f"{queue}-b", b), "state") == b"pending"

    again = echomq("dead", "retry", b, url=url)
    assert again.returncode == 1
    assert again.stderr.strip() == f"echomq: {b} not revived: job {b} is not dead, so there " \
        "is nothing to retry"
    verbose = echomq("dead", "retry", b, "--verbose", url=url)
    assert "EMQSTATE" in verbose.stderr and "EMQSTATE" not in again.stderr
    gone = echomq("dead", "retry", ids.mint(), url=url)
    assert gone.returncode == 1 and "no such job on any queue" in gone.stderr
    assert "EMQSTALE" not in gone.stderr


def test_repeat_list_covers_every_queue(conn, url, queue):
    assert repeat.register(conn, f"{queue}-reports", "nightly", 60_000, b"{}") == "registered"
    done = echomq("repeat", "list", url=url)
    assert done.returncode == 0, done.stderr
    mine = [ln.split() for ln in done.stdout.splitlines() if ln.startswith(f"{queue}-reports")]
    assert mine and mine[0][1] == "nightly"
    assert done.stdout.splitlines()[0].split()[:2] == ["QUEUE", "NAME"]


def test_stats_lists_empty_registered_and_declared_queues(conn, url, tmp_path, queue):
    registry.add(conn, [f"{queue}-empty"])
    (tmp_path / "decl.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue='{queue}-declared')\ndef t(): pass\n")
    done = echomq("stats", "--app", "decl:app", "--json", url=url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    zero = {s: 0 for s in jobs.STATE_SETS}
    assert table[f"{queue}-empty"] == zero and table[f"{queue}-declared"] == zero


def test_repeat_list_shows_a_record_with_an_unknown_zone(conn, url, queue):
    """A record whose zone was edited by hand to one the zone database lacks is listed (in
    UTC, naming the zone), and the listing of every queue still succeeds."""
    assert repeat.register(conn, f"{queue}-tz", "odd", 60_000, b"{}") == "registered"
    raw = valkey.Valkey.from_url(url)
    raw.hset(keyspace.queue_key(f"{queue}-tz", "repeat:odd"), "tz", "Nowhere/Town")
    done = echomq("repeat", "list", url=url)
    assert done.returncode == 0, done.stderr
    assert "unknown zone 'Nowhere/Town'" in done.stdout
