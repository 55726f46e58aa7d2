"""The transactional outbox on SQLite and on PostgreSQL (a throwaway cluster from Debian's
package): a job exists exactly when the caller's transaction commits, and the relay admits
each row once, also when it is SIGKILLed mid-batch and restarted."""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from echomq import outbox
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support import postgres
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres.cluster() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shop.db'}"
    url = str(request.getfixturevalue("pg_url"))
    with outbox.connect(url) as c:  # a fresh table per test
        c.execute(f"DROP TABLE IF EXISTS {outbox.TABLE}")
        c.execute("DROP TABLE IF EXISTS orders")
        c.commit()
    return url


@pytest.fixture
def shop(url: str, queue: str) -> Iterator[tuple[App, Any]]:
    app = App(url)

    @app.task(queue=queue)
    def ship(order: int, note: str = "") -> None: ...

    yield app, ship.options(priority=3)
    app.close()


def rows(db_url: str) -> list[str]:
    db = outbox.connect(db_url)
    try:
        outbox.install(db)
        d = outbox.of(db)
        got = [r[0] for r in d.execute(f"SELECT id FROM {outbox.TABLE} ORDER BY id", ())]
        db.commit()
        return got
    finally:
        db.close()


def write(db_url: str, ship: Any, orders: range, commit: bool = True) -> list[str]:
    """Insert orders and their jobs in one transaction; the jobs' ids."""
    db = outbox.connect(db_url)
    try:
        if isinstance(db, sqlite3.Connection):
            db.execute("BEGIN")
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
        ids = []
        for n in orders:
            outbox.of(db).execute(outbox.of(db).sql("INSERT INTO orders (id) VALUES (?)"),
                                  (n,))
            ids.append(outbox.enqueue(db, ship, n, note=f"order {n}"))
        if commit:
            db.execute("COMMIT") if isinstance(db, sqlite3.Connection) else db.commit()
        else:
            db.execute("ROLLBACK") if isinstance(db, sqlite3.Connection) else db.rollback()
        return ids
    finally:
        db.close()


def test_committed_rows_are_admitted_once_and_rolled_back_ones_never(db_url, shop, conn,
                                                                     queue) -> None:
    _, ship = shop
    kept = write(db_url, ship, range(1, 11))
    write(db_url, ship, range(11, 21), commit=False)
    assert rows(db_url) == sorted(kept) and jobs.counts(conn, queue)["pending"] == 0
    db = outbox.connect(db_url)
    try:
        assert outbox.relay(db, conn, batch=4, once=True) == outbox.Relayed(10, 0)
        assert outbox.relay(db, conn, once=True) == outbox.Relayed(0, 0)
    finally:
        db.close()
    assert rows(db_url) == [] and jobs.counts(conn, queue)["pending"] == 10
    for job_id in kept:
        row = jobs.get(conn, queue, job_id)
        assert row["priority"] == "3" and b'"note":"order' in row["payload"]


def test_a_relay_killed_mid_batch_admits_each_row_once_after_restart(db_url, shop, url, conn,
                                                                     queue, tmp_path) -> None:
    _, ship = shop
    ids = write(db_url, ship, range(1, 61))
    relay = popen("outbox", "relay", "--db", db_url, "--batch", "60", "--pace", "0.02",
                  "--once", url=url, cwd=tmp_path)
    try:
        wait_for(lambda: jobs.counts(conn, queue)["pending"] >= 5, timeout=60)
        relay.send_signal(signal.SIGKILL)
        relay.wait(timeout=30)
    finally:
        if relay.poll() is None:
            relay.kill()
    before = int(jobs.counts(conn, queue)["pending"])
    assert 5 <= before < 60 and rows(db_url) == sorted(ids)  # mid-batch: nothing deleted
    done = echomq("outbox", "relay", "--db", db_url, "--once", url=url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"relayed {60 - before} admitted, {before} already "
                                   f"admitted")
    assert rows(db_url) == [] and jobs.counts(conn, queue)["pending"] == 60
    assert all(jobs.get(conn, queue, i) for i in ids)


def test_an_sqlalchemy_session_writes_into_its_transaction(pg_url, shop, conn, queue,
                                                            tmp_path) -> None:
    _, ship = shop
    for url in (f"sqlite:///{tmp_path / 'sa.db'}", pg_url.replace("postgresql://",
                                                                  "postgresql+psycopg://")):
        engine = sa.create_engine(url)
        with orm.Session(engine) as s:
            outbox.install(s)
            s.execute(sa.text(f"DELETE FROM {outbox.TABLE}"))
            s.commit()
            kept = outbox.enqueue(s, ship, 1)
            s.commit()
            outbox.enqueue(s, ship, 2)
            s.rollback()
            got = s.execute(sa.text(f"SELECT id FROM {outbox.TABLE}")).scalars().all()
            assert got == [kept]
        engine.dispose()


def test_a_bad_argument_or_database_fails_before_anything_is_written(shop) -> None:
    _, ship = shop
    db = sqlite3.connect(":memory:")
    with pytest.raises(TypeError):
        outbox.enqueue(db, ship, object())
    with pytest.raises(TypeError, match="order"):
        outbox.enqueue(db, ship)  # the task's signature is checked
    with pytest.raises(TypeError, match="sqlite3 or psycopg"):
        outbox.enqueue(object(), ship, 1)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_the_relay_refuses_an_unknown_database_url(tmp_path) -> None:
    done = echomq("outbox", "relay", "--db", "mysql://x", "--once", cwd=tmp_path)
    assert done.returncode == 2 and "sqlite:///PATH" in done.stderr
