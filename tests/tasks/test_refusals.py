"""Every refusal writes nothing: not the job, and not the queue registry (``emq:queues``).

The App registers a queue the first time it admits a job there; a refused admission (too
large, an ACL's NOPERM, a bad id, a bad time) must leave the keyspace exactly as it was,
the registry included. A paused queue is no refusal: it admits (and registers) as usual.
Each case runs on a fresh App, so its connector has registered nothing yet.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from echomq import errors, ids
from echomq.core import keyspace
from echomq.tasks.app import App
from echomq.verbs import jobs, registry
from tests.support.cli import echomq
from tests.support.clients import snapshot

REGISTRY = keyspace.registry_key()


def world(raw, queue: str) -> tuple[dict[bytes, Any], bool]:
    """The queue's keys and whether the registry names it."""
    return snapshot(raw, queue), bool(raw.sismember(REGISTRY, queue))


@pytest.fixture
def unchanged(raw, queue) -> Iterator[Callable[[], None]]:
    """Call it after the refusal: the queue's keys and the registry are as before."""
    before = world(raw, queue)
    assert before == ({}, False)
    yield lambda: assert_same(before, world(raw, queue))


def assert_same(before: Any, after: Any) -> None:
    assert after == before, "a refusal wrote something"


def fresh_app(url: str, **kw: Any) -> App:
    return App(url, **kw)


def declare(app: App, queue: str) -> Any:
    @app.task(queue=queue)
    def send(body):
        return body

    return send


BIG = "x" * 4096


@pytest.mark.parametrize("how", ["enqueue", "enqueue_in", "enqueue_at", "enqueue_many",
                                 "aenqueue", "aenqueue_many", "options", "flow"])
def test_a_payload_too_large_writes_nothing(url, queue, unchanged, how):
    app = fresh_app(url, max_payload_bytes=1024)
    send = declare(app, queue)
    calls: dict[str, Callable[[], Any]] = {
        "enqueue": lambda: send.enqueue(BIG),
        "enqueue_in": lambda: send.enqueue_in(1000, BIG),
        "enqueue_at": lambda: send.enqueue_at(2_000_000_000_000, BIG),
        "enqueue_many": lambda: send.enqueue_many([("a",), (BIG,)]),
        "aenqueue": lambda: asyncio.run(send.aenqueue(BIG)),
        "aenqueue_many": lambda: asyncio.run(send.aenqueue_many([(BIG,)])),
        "options": lambda: send.options(priority=3, group="g").enqueue(BIG),
        "flow": lambda: app.flow(send.s("parent"), [send.s(BIG)]),
    }
    try:
        with pytest.raises(errors.PayloadTooLarge):
            calls[how]()
    finally:
        app.close()
    unchanged()


def test_a_refusal_by_the_acl_writes_nothing(server, raw, queue, unchanged):
    # a user that may write the registry and another queue, not this one
    user = "p" + uuid.uuid4().hex[:10]
    raw.acl_setuser(user, enabled=True, passwords=["+pw"],
                    keys=[REGISTRY, keyspace.queue_key("elsewhere" + user, "*")],
                    commands=["+@all"])
    app = fresh_app(f"valkey://{user}:pw@127.0.0.1:{server.port}/0")
    send = declare(app, queue)
    try:
        with pytest.raises(errors.NoPermission):
            send.enqueue("hi")
        with pytest.raises(errors.NoPermission):
            send.enqueue_in(5_000, "hi")
        with pytest.raises(errors.NoPermission):
            asyncio.run(send.aenqueue("hi"))
        with pytest.raises(errors.NoPermission):
            send.enqueue_many([("a",), ("b",)])
    finally:
        app.close()
        raw.acl_deluser(user)
    unchanged()


def test_a_bad_time_writes_nothing(url, queue, unchanged):
    app = fresh_app(url)
    send = declare(app, queue)
    try:
        with pytest.raises(ValueError, match="year 9999"):
            send.enqueue_at(10**15, "hi")
        with pytest.raises(ValueError, match="year 9999"):
            asyncio.run(send.aenqueue_at(10**15, "hi"))
        with pytest.raises(ValueError):
            send.enqueue_in(-1, "hi")
        with pytest.raises((TypeError, ValueError)):
            send.enqueue_at(float("inf"), "hi")
    finally:
        app.close()
    unchanged()


def test_a_bad_id_writes_nothing(url, conn, queue, unchanged):
    app = fresh_app(url)
    send = declare(app, queue)
    try:
        with pytest.raises((ValueError, errors.KindError)):
            send.options(job_id="NOTAJOB").enqueue("hi")
        with pytest.raises((ValueError, errors.KindError)):
            asyncio.run(send.options(job_id="NOTAJOB").aenqueue("hi"))
    finally:
        app.close()
    with pytest.raises(errors.KindError):
        jobs.enqueue(conn, queue, "NOTAJOB", b"x")
    with pytest.raises(errors.KindError):
        jobs.enqueue_in(conn, queue, "NOTAJOB", b"x", 1000)
    done = echomq("enqueue", "t.send", "--queue", queue, "--id", "NOTAJOB", url=url)
    assert done.returncode == 2 and "is not a job id" in done.stderr
    unchanged()


def test_a_bad_kind_writes_nothing(url, queue, unchanged):
    app = fresh_app(url)
    send = declare(app, queue)
    try:
        with pytest.raises(TypeError):
            send.enqueue(object())  # no JSON for it
        with pytest.raises(ValueError):
            send.options(priority=-1).enqueue("hi")
        with pytest.raises(ValueError):
            send.options(group="a{b}").enqueue("hi")
    finally:
        app.close()
    unchanged()


def test_a_paused_queue_is_no_refusal(url, conn, raw, queue):
    jobs.pause(conn, queue)
    app = fresh_app(url)
    send = declare(app, queue)
    try:
        jid = send.enqueue("hi")
    finally:
        app.close()
    assert raw.hget(keyspace.job_key(queue, jid), "state") == b"pending"
    assert queue in registry.names(conn)


def test_the_registry_is_written_once_admitted(url, conn, queue):
    app = fresh_app(url)
    send = declare(app, queue)
    try:
        jid = send.enqueue("hi")
        assert queue in registry.names(conn)
        assert app.job(jid).state == "pending"
        assert ids.timestamp_ms(jid) > 0
    finally:
        app.close()
