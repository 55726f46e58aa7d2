"""Tasks: declaration, the JSON payload, enqueue now/in/at (sync and async), the clear
error for an unserializable argument, job status, the embedded server, recurrence specs."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time

import pytest

from echomq import AsyncConnector
from echomq.core import keyspace
from echomq.core.payload import decode, encode
from echomq.runtime.consumer import Consumer
from echomq.tasks.app import App
from echomq.tasks.declare import Recurrence
from echomq.tasks.worker import Worker
from echomq.verbs import jobs, repeat
from echomq.verbs.repeat import Definition
from tests.support.clients import server_ms
from tests.support.workers import run_until


def k(queue: str, suffix: str) -> str:
    return keyspace.queue_key(queue, suffix)


def test_payload_is_compact_sorted_json():
    body = encode("mail.send", [1, "x"], {"b": 2, "a": None})
    assert body == b'{"args":[1,"x"],"kwargs":{"a":null,"b":2},"task":"mail.send"}'
    assert decode(body) == ("mail.send", [1, "x"], {"a": None, "b": 2})
    with pytest.raises(ValueError):
        decode(b"not json")
    with pytest.raises(ValueError):
        decode(b'{"args": []}')


def test_task_declaration_and_direct_call(app, queue):
    @app.task(queue=queue, max_attempts=3, backoff=("exponential", 10, 100), lease_ms=5000)
    def add(a, b):
        return a + b

    assert add(2, 3) == 5
    assert add.name.endswith("add") and add.queue == queue
    assert (add.max_attempts, add.backoff, add.lease_ms) == (3, ("exponential", 10, 100), 5000)
    assert app.queues() == [queue]
    with pytest.raises(ValueError):
        app.task(queue=queue, max_attempts=0)
    with pytest.raises(ValueError):
        app.task(queue="bad{q}")
    with pytest.raises(ValueError):
        app.task(queue=queue, backoff=("sideways", 1))

    @app.task
    def plain():
        return "p"

    assert plain.queue == "default" and plain() == "p"


@pytest.mark.topologies
def test_enqueue_now_in_and_at(app, raw, queue):
    @app.task(queue=queue, name="greet")
    def greet(name, punct="!"):
        return name + punct

    now_id = greet.enqueue("ada", punct="?")
    row = raw.hgetall(keyspace.job_key(queue, now_id))
    assert row[b"state"] == b"pending"
    assert json.loads(row[b"payload"]) == {"task": "greet", "args": ["ada"],
                                          "kwargs": {"punct": "?"}}
    assert raw.zscore(k(queue, "pending"), now_id) == 0

    before = server_ms(raw)
    in_id = greet.enqueue_in(dt.timedelta(seconds=5), "bob")
    after = server_ms(raw)
    score = raw.zscore(k(queue, "schedule"), in_id)
    assert before + 5000 <= score <= after + 5000

    in_ms_id = greet.enqueue_in(250, "cy")
    assert raw.zscore(k(queue, "schedule"), in_ms_id) <= server_ms(raw) + 250

    when = dt.datetime(2031, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    at_id = greet.enqueue_at(when, "dee")
    assert raw.zscore(k(queue, "schedule"), at_id) == when.timestamp() * 1000
    at_ms_id = greet.enqueue_at(1_900_000_000_000, "eve")
    assert raw.zscore(k(queue, "schedule"), at_ms_id) == 1_900_000_000_000
    assert len({now_id, in_id, in_ms_id, at_id, at_ms_id}) == 5

    info = app.job(at_id)
    assert info is not None
    assert (info.state, info.attempts, info.error) == ("scheduled", 0, None)
    assert info.run_at == when and info.task == "greet" and info.args == ["dee"]
    assert app.job(now_id).run_at is None
    assert app.job("JOB" + "0" * 26) is None


def test_unserializable_argument_is_a_clear_error_and_writes_nothing(app, queue, snap):
    @app.task(queue=queue, name="store")
    def store(x, **kw):
        return x

    with pytest.raises(TypeError, match=r"store: argument 0 \(object\) is not JSON-serializable"):
        store.enqueue(object())
    with pytest.raises(TypeError, match=r"keyword argument 'when' \(lock\)"):
        store.enqueue_in(100, 1, when=threading.Lock())
    with pytest.raises(TypeError, match="not JSON-serializable"):
        store.enqueue_at(0, float("nan"))
    with pytest.raises(ValueError):
        store.enqueue_in(-5, 1)
    assert snap(queue) == {}


@pytest.mark.topologies
def test_async_enqueue_variants(app, raw, queue):
    @app.task(queue=queue, name="ping")
    async def ping(n):
        return n

    async def main() -> list[str]:
        out = [await ping.aenqueue(1), await ping.aenqueue_in(1000, 2),
               await ping.aenqueue_at(dt.datetime(2032, 1, 1, tzinfo=dt.UTC), 3)]
        info = await app.ajob(out[1])
        assert info is not None and info.state == "scheduled" and info.args == [2]
        await app.aclose()
        return out

    now_id, in_id, at_id = asyncio.run(main())
    assert raw.hget(keyspace.job_key(queue, now_id), "state") == b"pending"
    assert raw.zscore(k(queue, "schedule"), in_id) is not None
    assert raw.zscore(k(queue, "schedule"), at_id) == 1956528000000


@pytest.mark.topologies
def test_job_status_after_dead_letter(app, url, queue):
    @app.task(queue=queue, name="doomed", max_attempts=2, retry_delay_ms=10)
    def doomed(x):
        raise RuntimeError(f"nope {x}")

    job_id = doomed.enqueue(7)

    async def main() -> None:
        conn = await AsyncConnector.connect(url)
        consumer = Consumer(conn, queue, router=app.router(queue), beat_ms=20)
        stop = asyncio.Event()
        task = asyncio.ensure_future(consumer.serve(stop, 2))
        deadline = time.monotonic() + 5
        while consumer.stats.dead < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()
        await task
        await conn.close()

    asyncio.run(main())
    info = app.job(job_id, queue=queue)
    assert info is not None
    assert (info.state, info.attempts, info.failures) == ("dead", 2, 2)
    assert info.error == "RuntimeError: nope 7"
    assert info.died_at_ms is not None and info.run_at is None


def test_embedded_server_started_once_per_data_dir(tmp_path, monkeypatch):
    from echomq.embedded import datadir
    from echomq.embedded.server import EmbeddedServer

    monkeypatch.delenv("ECHOMQ_URL", raising=False)
    first = App(data_dir=tmp_path)
    try:
        url = first.url
        pid = first.server_record.pid
        assert first.server is None and datadir.pid_alive(pid)  # detached: not first's
        assert (tmp_path / "echomq-server.json").exists()
        second = App(data_dir=tmp_path)
        assert second.url == url and second.server_record.pid == pid  # found, not started
        second.close()

        @first.task(queue="emb", name="t")
        def t():
            return 1

        jid = t.enqueue()
        assert first.job(jid).state == "pending"
        first.close()
        assert datadir.pid_alive(pid)  # the implicit server outlives the app
    finally:
        stopped = EmbeddedServer.stop_recorded(tmp_path)
    assert stopped is not None and stopped.pid == pid
    assert not datadir.pid_alive(pid)


def test_env_url_wins_over_embedded(url, monkeypatch, tmp_path):
    monkeypatch.setenv("ECHOMQ_URL", url)
    a = App(data_dir=tmp_path)
    assert a.url == url and a.server is None
    a.close()


def test_every_and_cron_store_registration_specs(app, queue):
    @app.every(dt.timedelta(minutes=5))
    @app.task(queue=queue, name="tick")
    def tick():
        return None

    @app.cron("0 3 * * *", tz="Europe/Paris", name="nightly", args=[1])
    def nightly(n):
        return n

    assert app.recurrences == [
        Recurrence("tick", queue, "tick",
                   Definition.of(template=encode("tick"), every_ms=300_000)),
        Recurrence(nightly.name, "default", "nightly",
                   Definition.of(template=encode(nightly.name, [1]), cron="0 3 * * *",
                                 tz="Europe/Paris")),
    ]
    with pytest.raises(ValueError, match="already registered"):
        app.every(1000)(tick)
    with pytest.raises(ValueError):
        app.every(0)
    with pytest.raises(ValueError):
        app.cron("   ")


@pytest.mark.topologies
def test_worker_upserts_registrations_and_its_pump_fires_them(app, url, raw, queue):
    runs: list[float] = []

    @app.every(dt.timedelta(milliseconds=200), name="heartbeat")
    @app.task(queue=queue, name="beat")
    def beat():
        runs.append(time.monotonic())

    async def main() -> None:
        worker = Worker(app, [queue], beat_ms=50, grace_s=2)
        assert await run_until(worker, lambda: len(runs) >= 2, 6) == 0

    asyncio.run(main())
    assert len(runs) >= 2
    assert repeat.count(app.connector(), queue) == 1
    record = raw.hgetall(keyspace.repeat_key(queue, "heartbeat"))
    assert record[b"template"] == encode("beat")
    assert jobs.counts(app.connector(), queue)["dead"] == 0
