"""``task.enqueue_on_commit``: sent when a real transaction commits, never when it rolls
back (Django's atomic blocks and savepoints on SQLite; SQLAlchemy sessions on SQLite);
the id is minted and the arguments checked at the call."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from echomq import on_commit
from echomq.tasks.app import App
from echomq.verbs import jobs


@pytest.fixture
def pair(url: str, queue: str) -> Iterator[tuple[App, Any]]:
    app = App(url)

    @app.task(queue=queue)
    def notify(user: int) -> None: ...

    yield app, notify
    app.close()


def pending(conn: Any, queue: str) -> int:
    return int(jobs.counts(conn, queue)["pending"])


@pytest.fixture(scope="module")
def django_db(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from django.conf import settings

    if not settings.configured:
        db = tmp_path_factory.mktemp("django") / "db.sqlite3"
        settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                                  "NAME": str(db)}}, INSTALLED_APPS=[])
    import django
    from django.db import connection

    django.setup()
    with connection.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, user INTEGER)")
    return connection


def test_django_sends_on_commit_and_never_on_rollback(pair, conn, queue, django_db) -> None:
    from django.db import transaction

    _, notify = pair
    with transaction.atomic():
        with django_db.cursor() as cur:
            cur.execute("INSERT INTO orders (user) VALUES (1)")
        job = notify.enqueue_on_commit(1)
        assert job.startswith("JOB") and pending(conn, queue) == 0  # minted, not yet sent
    assert pending(conn, queue) == 1 and jobs.get(conn, queue, job)

    with pytest.raises(RuntimeError), transaction.atomic():
        notify.enqueue_on_commit(2)
        raise RuntimeError("the view failed")
    with transaction.atomic():  # a rolled-back savepoint drops its job, the outer one sends
        kept = notify.enqueue_on_commit(3)
        with pytest.raises(RuntimeError), transaction.atomic():
            notify.enqueue_on_commit(4)
            raise RuntimeError("inner")
    assert pending(conn, queue) == 2 and jobs.get(conn, queue, kept)
    notify.enqueue_on_commit(5)  # no transaction open: sent at once
    assert pending(conn, queue) == 3


def test_a_bad_argument_fails_inside_the_transaction(pair, django_db) -> None:
    from django.db import transaction

    _, notify = pair
    with pytest.raises(TypeError), transaction.atomic():
        notify.enqueue_on_commit(object())


@pytest.fixture
def engine(tmp_path: pathlib.Path) -> Iterator[sa.Engine]:
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with eng.begin() as c:
        c.exec_driver_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, user INTEGER)")
    yield eng
    eng.dispose()


def test_sqlalchemy_session_keyword_sends_after_commit_only(pair, conn, queue, engine) -> None:
    _, notify = pair
    with orm.Session(engine) as s:
        s.execute(sa.text("INSERT INTO orders (user) VALUES (1)"))
        job = notify.enqueue_on_commit(1, session=s)
        assert pending(conn, queue) == 0
        s.commit()
        assert pending(conn, queue) == 1 and jobs.get(conn, queue, job)

        s.execute(sa.text("INSERT INTO orders (user) VALUES (2)"))
        notify.enqueue_on_commit(2, session=s)
        s.rollback()
        s.commit()  # a later commit does not revive what the rollback dropped
    assert pending(conn, queue) == 1
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM orders").scalar() == 1


def test_sqlalchemy_bound_session_and_a_session_argument_of_the_task(url, conn, queue,
                                                                     engine) -> None:
    app = App(url)

    @app.task(queue=queue)
    def audit(session: str) -> None: ...  # a plain value named "session" is the task's

    try:
        with orm.Session(engine) as s, on_commit.session(s):
            job = audit.enqueue_on_commit(session="web")
            assert pending(conn, queue) == 0
            s.commit()
        assert pending(conn, queue) == 1
        row = jobs.get(conn, queue, job)
        assert b'"session":"web"' in row["payload"]
    finally:
        app.close()
