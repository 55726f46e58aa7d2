"""A signal racing a wait (DESIGN §3h; ``echomq.verbs.durable``): the interleavings made
exact by driving the wait's steps by hand, a waiter killed part way, and the race run many
times on two connections (threads, sync) and on asyncio; single server and cluster. No
waiter is ever left behind by a signal it raced."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from echomq import AsyncConnector, Connector
from echomq.core import ids, keyspace
from echomq.verbs import durable, jobs
from tests.support.durable import Direct, held, past_registrations, sig, state, wait_keys

pytestmark = pytest.mark.topologies


def _stepped(conn, verb_steps, between_after: int, between):
    """Drive a verb's steps by hand on a sync connector, running ``between()`` after step
    number ``between_after`` (0-based) was answered: a chosen interleaving, made exact."""
    gen = verb_steps
    step, n = next(gen), 0
    while True:
        reply = conn.execute(step)
        if n == between_after:
            between()
        n += 1
        try:
            step = gen.send(reply)
        except StopIteration as stop:
            return stop.value


def test_a_signal_landing_between_registration_and_park_is_taken_from_the_queue(conn, raw,
                                                                               queue):
    """The interleaving where the sender's resume runs before the job parks: it resumes
    nobody but leaves the queue a copy of the payload, which the park (ordered after it in
    the queue's slot) takes instead of parking."""
    key = sig()
    jid, token = held(Direct(conn), queue)
    sent: list[int] = []
    got = _stepped(conn, durable.wait_for.steps(queue, jid, token, "approve", key, 60_000),
                   1, lambda: sent.append(durable.signal(conn, key, b'"late"', ttl_ms=60_000)))
    assert sent == [0]
    assert got.fresh and got.step.state == "done" and got.step.result == b'"late"'
    assert state(raw, queue, jid) == "active"  # never parked: the handler runs on
    assert wait_keys(raw, queue, jid, key) == (False, False, False)
    assert 0 < raw.pttl(keyspace.queue_key(queue, f"signalled:{key}")) <= 60_000


def test_a_waiter_that_dies_after_registering_leaves_nothing_behind(conn, raw, queue):
    """A waiter killed between its registration and its park: the job is still in hand (its
    lease runs out and the reaper returns it, as for any crash), and a signal finds only an
    index entry, resumes nobody and drops it."""
    key = sig()
    jid, token = held(Direct(conn), queue)
    steps = durable.wait_for.steps(queue, jid, token, "approve", key, 60_000)
    assert conn.execute(next(steps)) is None  # the check: no step of that name yet
    assert conn.execute(steps.send(None)) is None  # registered, then the process died
    steps.close()
    assert state(raw, queue, jid) == "active"
    past_registrations(raw, key)
    assert durable.signal(conn, key, b"1") == 0
    assert raw.exists(keyspace.signal_key(key, "queues")) == 0
    assert state(raw, queue, jid) == "active"


def test_a_signal_after_the_registration_is_the_senders_to_deliver(conn, raw, queue):
    key = sig()
    jid, token = held(Direct(conn), queue)
    got = durable.wait_for(conn, queue, jid, token, "approve", key, 60_000)
    assert got.step.state == "waiting" and state(raw, queue, jid) == "waiting"
    assert raw.zscore(keyspace.signal_key(key, "queues"), queue) is not None
    past_registrations(raw, key)
    assert durable.signal(conn, key, b'"on time"') == 1
    # the entry it delivered is dropped; the index key goes with its last entry
    assert raw.exists(keyspace.signal_key(key, "queues")) == 0


ROUNDS = 60


def test_a_signal_racing_a_wait_never_leaves_the_waiter_behind(url, raw, queue):
    """Two threads, two connections: one job waits (wait_for) while the signal for its key
    is sent, released together by a barrier; repeated with fresh keys. Every round ends
    with the job resumed (pending) or never parked (active: it took the payload), its step
    done with the payload, nothing left on a wait index."""
    waiter, sender = Connector.connect(url), Connector.connect(url)
    try:
        outcomes = set()
        for i in range(ROUNDS):
            key = sig()
            jid, token = held(Direct(waiter), queue)
            gate = threading.Barrier(2)
            resumed: list[int] = []

            def send(key: str = key, gate: threading.Barrier = gate,
                     resumed: list[int] = resumed, i: int = i) -> None:
                gate.wait()
                if i % 3 == 0:
                    time.sleep(0.0005 * (i % 5))  # vary who lands first
                resumed.append(durable.signal(sender, key, b'"go"'))

            t = threading.Thread(target=send)
            t.start()
            gate.wait()
            got = durable.wait_for(waiter, queue, jid, token, "approve", key, 60_000)
            t.join()
            st = state(raw, queue, jid)
            assert st in ("pending", "active"), (i, st, got)
            [step] = durable.steps(waiter, queue, jid)
            assert step.state == "done" and step.result == b'"go"', (i, step)
            assert wait_keys(raw, queue, jid, key) == (False, False, False)
            outcomes.add((st, resumed[0]))
            if st == "active":
                jobs.ack(waiter, queue, jid, token)
            else:
                c = jobs.claim(waiter, queue, 60_000)
                jobs.ack(waiter, queue, c.id, c.token)
        assert "waiting" not in jobs.counts(waiter, queue)
    finally:
        waiter.close()
        sender.close()


def test_a_signal_racing_many_waits_on_asyncio(url, raw, queue):
    """The same race on the asyncio connector: per round, several jobs on two queues wait
    for one key while the signal goes out; none is left waiting."""
    queues = [queue, queue + "-b"]

    async def rounds() -> None:
        a = await AsyncConnector.connect(url)
        b = await AsyncConnector.connect(url)
        try:
            for _ in range(ROUNDS // 3):
                key = sig()
                held_jobs = []
                for q in queues:
                    for _ in range(2):
                        jid = ids.mint()
                        await jobs.enqueue(a, q, jid, b"x")
                        c = await jobs.claim(a, q, 60_000)
                        held_jobs.append((q, c.id, c.token))
                await asyncio.gather(
                    *(durable.wait_for(a, q, j, t, "approve", key, 60_000)
                      for q, j, t in held_jobs),
                    durable.signal(b, key, b'"go"'))
                for q, j, _ in held_jobs:
                    assert state(raw, q, j) in ("pending", "active")
                    [step] = await durable.steps(a, q, j)
                    assert step.state == "done" and step.result == b'"go"'
                    await jobs.cancel(a, q, j)  # clear the queue for the next round
        finally:
            await a.close()
            await b.close()

    asyncio.run(rounds())
