"""``testing.advance``: stored instants move earlier (the ``travel`` script); leases never."""

from __future__ import annotations

import datetime as dt

import pytest
import valkey

from echomq import errors, groups, jobs, keyspace, repeat, testing
from echomq.core.steps import Eval, drive, single
from echomq.tasks.app import App
from echomq.verbs import travel

HOUR = dt.timedelta(hours=1)



def test_what_falls_due_runs_in_run_at_order(kit: App, queue: str) -> None:
    order: list[int] = []

    @kit.task(queue=queue)
    def note(n: int) -> None:
        order.append(n)

    note.enqueue_in(3 * HOUR, 3)
    note.enqueue_in(HOUR, 1)
    note.enqueue_in(2 * HOUR, 2)
    moved = testing.advance(kit, 2 * HOUR + dt.timedelta(minutes=1), queues=[queue])
    assert moved[queue].scheduled == 3
    assert testing.drain(kit).completed == 2 and order == [1, 2]
    # the third is an hour nearer, not due
    (left,) = testing.enqueued(kit, note)
    assert left.run_at is not None
    ahead = left.run_at - dt.datetime.now(dt.UTC)
    assert dt.timedelta(minutes=50) < ahead < dt.timedelta(minutes=60)
    testing.advance(kit, HOUR, queues=[queue])
    testing.drain(kit)
    assert order == [1, 2, 3]


def test_deadlines_and_pause_ends_move(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def job() -> str:
        return "ran"

    conn = kit.connector()
    kept = job.options(expires=3 * HOUR).enqueue()
    jobs.pause(conn, queue, until=dt.datetime.now(dt.UTC) + HOUR)
    assert testing.drain(kit).ran == 0  # paused
    testing.advance(kit, HOUR + dt.timedelta(seconds=1), queues=[queue])
    assert not jobs.is_paused(conn, queue)
    assert testing.drain(kit).results == {kept: "ran"}
    lost = job.options(expires=HOUR).enqueue_in(2 * HOUR)
    testing.advance(kit, 2 * HOUR, queues=[queue])
    got = testing.drain(kit)
    assert (got.expired, got.ran) == (1, 0) and kit.job(lost).state == "expired"


def test_a_groups_pause_end_moves(kit: App, queue: str) -> None:
    @kit.task(queue=queue, group="acme")
    def job() -> None: ...

    conn = kit.connector()
    groups.pause(conn, queue, "acme", until=dt.datetime.now(dt.UTC) + HOUR)
    job.enqueue()
    assert testing.drain(kit).ran == 0
    testing.advance(kit, HOUR + dt.timedelta(seconds=1), queues=[queue])
    assert testing.drain(kit).completed == 1


def test_recurrences_fire_as_time_moves(kit: App, queue: str) -> None:
    ticks: list[str] = []

    @kit.every(HOUR, name="hourly")
    @kit.task(queue=queue)
    def tick() -> None:
        ticks.append("tick")

    assert testing.drain(kit, with_recurrences=True).completed == 1  # a worker's start
    assert testing.drain(kit, with_recurrences=True).completed == 0  # next in an hour
    moved = testing.advance(kit, HOUR, queues=[queue])
    assert moved[queue].registrations == 1
    assert testing.drain(kit, with_recurrences=True).completed == 1
    assert ticks == ["tick", "tick"]


def test_a_registrations_pause_end_moves(kit: App, queue: str) -> None:
    @kit.every(HOUR, name="hourly-paused")
    @kit.task(queue=queue)
    def tick() -> None: ...

    assert testing.drain(kit, with_recurrences=True).completed == 1
    repeat.pause(kit.connector(), queue, "hourly-paused",
                 until=dt.datetime.now(dt.UTC) + 2 * HOUR)
    testing.advance(kit, HOUR + dt.timedelta(minutes=1), queues=[queue])
    assert testing.drain(kit, with_recurrences=True).completed == 0  # still paused
    testing.advance(kit, HOUR, queues=[queue])
    assert testing.drain(kit, with_recurrences=True).completed == 1  # resumed and fired


def test_a_debounce_cap_moves_with_its_run_at(kit: App, queue: str) -> None:
    @kit.task(queue=queue)
    def save(doc: str) -> None: ...

    folded = save.options(debounce="doc-1", debounce_ms=60_000, debounce_max_ms=120_000)
    first = folded.enqueue("v1")
    testing.advance(kit, 90_000, queues=[queue])
    # the first call is now 90 s back: the cap (first + 120 s) is 30 s ahead, not 120 s
    assert folded.enqueue("v2") == first
    (waiting,) = testing.enqueued(kit, save)
    assert waiting.args == ["v2"] and waiting.run_at is not None
    assert waiting.run_at - dt.datetime.now(dt.UTC) <= dt.timedelta(seconds=31)


def test_an_active_lease_never_moves(kit: App, queue: str, raw: valkey.Valkey) -> None:
    conn = kit.connector()
    jobs.enqueue(conn, queue, "JOB-lease-1", b'{"args":[],"kwargs":{},"task":"x"}')
    claim = jobs.claim(conn, queue, 60_000)
    assert claim is not None
    active = keyspace.queue_key(queue, "active")
    before = raw.zscore(active, claim.id)
    testing.advance(kit, 2 * HOUR, queues=[queue])
    assert raw.zscore(active, claim.id) == before
    assert jobs.reap(conn, queue, 10) == 0


def test_the_shift_is_checked(kit: App, queue: str) -> None:
    with pytest.raises(ValueError):
        testing.advance(kit, 0, queues=[queue])
    with pytest.raises(TypeError):
        testing.advance(kit, HOUR, queues=queue)  # type: ignore[arg-type]
    # the script refuses what the guard would not send
    bad = single(Eval("travel", (keyspace.queue_key(queue, "schedule"),
                                 keyspace.queue_key(queue, "repeat")),
                      (keyspace.base(queue), "1.5")), lambda r: r)
    with pytest.raises(errors.EchoMQError, match=r"EMQ\.TRAVEL"):
        drive(kit.connector(), bad)
    assert travel.schedule_due(kit.connector(), queue).ms == 0
