"""Bounded inputs: every time argument, the payload size and the
argument depth are refused before any I/O, with a clear error, and nothing is written."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import pytest

from echomq import Connector
from echomq.core import errors, ids, keyspace
from echomq.runtime.handler import Delay
from echomq.tasks.app import App
from echomq.verbs import jobs, repeat

MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z (echomq.core.guards.MAX_TIME_MS)


def max_span_ms() -> int:
    return MAX_TIME_MS - time.time_ns() // 1_000_000


# a run-at or a delay the server would store as inf (or past year 9999, or not a number)
HUGE = [10**400, 2**64, MAX_TIME_MS + 1, float("inf"), float("-inf"), float("nan")]
TEMPLATE = b'{"args":[],"kwargs":{},"task":"t"}'


def _time_calls(queue: str, bad: object) -> list[tuple[str, object, tuple[object, ...], dict]]:
    jid = ids.mint()
    calls: list[tuple[str, object, tuple[object, ...], dict]] = [
        ("enqueue_at", jobs.enqueue_at, (queue, jid, b"x", bad), {}),
        ("enqueue_in", jobs.enqueue_in, (queue, jid, b"x", bad), {}),
        ("schedule_many in", jobs.schedule_many, (queue, [(jid, b"x", "in", bad)]), {}),
        ("schedule_many at", jobs.schedule_many, (queue, [(jid, b"x", "at", bad)]), {}),
        ("claim lease", jobs.claim, (queue, bad), {}),
        ("claim_many lease", jobs.claim_many, (queue, bad, 5), {}),
        ("ack_and_claim lease", jobs.ack_and_claim, (queue, [], bad, 5), {}),
        ("retry delay", jobs.retry, (queue, jid, 1, bad, 5, "boom"), {}),
        ("delay in", jobs.delay, (queue, jid, 1, bad, "in"), {}),
        ("delay at", jobs.delay, (queue, jid, 1, bad, "at"), {}),
        ("extend lease", jobs.extend, (queue, jid, 1, bad), {}),
        ("repeat.register every", repeat.register, (queue, "r", bad, TEMPLATE), {}),
        ("repeat.register first_in", repeat.register, (queue, "r", 1000, TEMPLATE, bad), {}),
        ("repeat.advance", repeat.advance, (queue, "r", bad), {}),
        ("repeat.upsert every", repeat.upsert, (queue, "r"),
         {"template": TEMPLATE, "every_ms": bad}),
        ("repeat.upsert first_in", repeat.upsert, (queue, "r"),
         {"template": TEMPLATE, "every_ms": 1000, "first_in_ms": bad}),
        ("repeat.upsert start_at", repeat.upsert, (queue, "r"),
         {"template": TEMPLATE, "every_ms": 1000, "start_at": bad}),
        ("repeat.register_cron end_at", repeat.register_cron,
         (queue, "r", "* * * * *", TEMPLATE), {"end_at": bad}),
        ("repeat.due now", repeat.due, (queue, bad), {}),
        ("repeat.sweep now", repeat.sweep, (queue, bad), {}),
    ]
    return calls


def test_huge_time_arguments_are_refused_on_every_verb(run, queue, snap):
    before = snap(queue)
    for bad in HUGE:
        for what, verb, args, kwargs in _time_calls(queue, bad):
            with pytest.raises(ValueError, match=r"year 9999|finite|must be >="):
                run(verb, *args, **kwargs)  # raised while building: before any I/O
            assert snap(queue) == before, (what, bad)
    if run.wire == 6:
        for bad in HUGE:
            for mode in ("in", "at"):
                with pytest.raises(ValueError):
                    run(jobs.reschedule, queue, ids.mint(), mode, bad)


def test_the_bound_itself_is_accepted(run, raw, queue):
    """Year 9999 is the edge, not an error: the last instant stores exactly, and a delay
    just under the span bound schedules a job due before it."""
    edge, near = ids.mint(), ids.mint()
    assert run(jobs.enqueue_at, queue, edge, b"x", MAX_TIME_MS) == "scheduled"
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), edge) == MAX_TIME_MS
    assert run(jobs.enqueue_in, queue, near, b"x", max_span_ms() - 60_000) == "scheduled"
    assert raw.zscore(keyspace.queue_key(queue, "schedule"), near) <= MAX_TIME_MS
    with pytest.raises(ValueError, match="year 9999"):
        run(jobs.enqueue_in, queue, ids.mint(), b"x", max_span_ms() + 60_000)


def test_friendly_layer_refuses_huge_times(app, queue, snap):
    @app.task(queue=queue)
    def t() -> None: ...

    before = snap(queue)
    for delay in (dt.timedelta.max, 10**400, 2**64):
        with pytest.raises(ValueError):
            t.enqueue_in(delay)
        with pytest.raises(ValueError):
            asyncio.run(t.aenqueue_in(delay))
        with pytest.raises(ValueError):
            Delay(delay)
        with pytest.raises(ValueError):
            app.every(delay)
        if isinstance(delay, int):
            with pytest.raises(ValueError):
                app.task(queue=queue, lease_ms=delay, name="other")
    for at in (10**400, 2**64, -(2**64)):
        with pytest.raises(ValueError):
            t.enqueue_at(at)
        with pytest.raises(ValueError):
            asyncio.run(t.aenqueue_at(at))
        with pytest.raises(ValueError):
            Delay(at=at)
    assert snap(queue) == before
    # the friendly forms at a sane size still work
    assert t.enqueue_in(dt.timedelta(days=365 * 100))
    assert t.enqueue_at(dt.datetime.max.replace(tzinfo=dt.UTC))  # the last instant
    assert Delay(dt.timedelta(days=1)).value == 86_400_000


def test_backoff_policies_are_bounded():
    from echomq.core import backoff
    for policy in [("fixed", 10**400), ("exponential", 1, 2**64), ("exponential", 2**64, 1)]:
        with pytest.raises(ValueError):
            backoff.validate(policy)
    assert backoff.delay_ms(("fixed", MAX_TIME_MS), 1) == MAX_TIME_MS


def _deep(n: int) -> list[object]:
    root: list[object] = []
    node = root
    for _ in range(n):
        child: list[object] = []
        node.append(child)
        node = child
    return root


def test_deeply_nested_argument_is_the_encoders_type_error(app, queue, snap):
    """A 100k-deep argument gets the TypeError every unencodable argument gets (it was a
    RecursionError from inside json), and nothing is written."""
    @app.task(queue=queue)
    def t(x: object) -> None: ...

    before = snap(queue)
    with pytest.raises(TypeError, match=r"argument 0 \(list\) is not JSON-serializable: "
                                         r"nested too deeply"):
        t.enqueue(_deep(100_000))
    with pytest.raises(TypeError, match=r"keyword argument 'x' \(list\) is not JSON-serial"):
        asyncio.run(t.aenqueue(x=_deep(100_000)))
    with pytest.raises(TypeError, match="not JSON-serializable"):
        t.enqueue({1j})  # the message an ordinary unencodable argument gets, for comparison
    assert snap(queue) == before
    assert t.enqueue(_deep(50))  # moderate nesting still goes through


def test_payload_over_the_default_limit_is_refused_before_sending(run, queue, snap):
    from echomq.connectors.plan import MAX_PAYLOAD_BYTES

    assert MAX_PAYLOAD_BYTES == 64 * 1024 * 1024
    before = snap(queue)
    big = b"x" * (MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(errors.PayloadTooLarge, match=r"payload is 67,108,865 bytes, over the "
                                                     r"limit of 67,108,864 bytes") as exc:
        run(jobs.enqueue, queue, ids.mint(), big)
    assert (exc.value.size, exc.value.limit) == (MAX_PAYLOAD_BYTES + 1, MAX_PAYLOAD_BYTES)
    assert isinstance(exc.value, ValueError)
    with pytest.raises(errors.PayloadTooLarge):
        run(jobs.enqueue_many, queue, [(ids.mint(), b"ok"), (ids.mint(), big)])
    assert snap(queue) == before
    assert run(jobs.enqueue, queue, ids.mint(), b"x") == "enqueued"  # the connection is fine


def test_max_payload_bytes_is_configurable(url, queue, snap):
    with App(url, max_payload_bytes=1024) as app:
        @app.task(queue=queue)
        def t(s: str) -> None: ...

        before = snap(queue)
        with pytest.raises(errors.PayloadTooLarge, match=r"bytes, over the limit of 1,024"):
            t.enqueue("x" * 2000)
        with pytest.raises(errors.PayloadTooLarge):
            asyncio.run(t.aenqueue("x" * 2000))
        with pytest.raises(errors.PayloadTooLarge):
            t.enqueue_in(1000, "é" * 600)  # 600 characters, 1,200+ bytes on the wire
        assert snap(queue) == before
        assert t.enqueue("x" * 500)
    conn = Connector.connect(url, max_payload_bytes=1024)
    try:
        assert jobs.enqueue(conn, queue, ids.mint(), b"x" * 1024) == "enqueued"  # the edge
        with pytest.raises(errors.PayloadTooLarge, match="1,025 bytes"):
            jobs.enqueue(conn, queue, ids.mint(), b"x" * 1025)
    finally:
        conn.close()
    for bad in (0, -1, 2**40, 1.5):
        with pytest.raises(ValueError):
            App(url, max_payload_bytes=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            Connector.connect(url, max_payload_bytes=bad)  # type: ignore[arg-type]


def test_cli_refuses_huge_times_without_a_traceback(url, queue, snap):
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).with_name("echomq"))
    before = snap(queue)
    for extra, says in ((["--in", "1000000000000000000d"], "within year 9999"),
                        (["--at", "9" * 30], "within year 9999")):
        p = subprocess.run([exe, "schedule", "t", "--queue", queue, "--url", url, *extra],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        assert says in p.stderr and "Traceback" not in p.stderr
    assert snap(queue) == before
