"""``task.enqueue_on_commit``: sent when a real transaction commits, never when it rolls
back (Django's atomic blocks and savepoints on SQLite; SQLAlchemy sessions on SQLite);
the id is minted and the arguments checked at the call."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from echomq import on_commit
from echomq.tasks.app import App
from echomq.verbs import jobs
from tests.support.paths import ROOT


@pytest.fixture
def pair(url: str, queue: str) -> Iterator[tuple[App, Any]]:
    app = App(url)

    @app.task(queue=queue)
    def notify(user: int) -> None: ...

    yield app, notify
    app.close()


def pending(conn: Any, queue: str) -> int:
    return int(jobs.counts(conn, queue)["pending"])


# Django's settings are process-wide: its tests run in a process of their own
DJANGO = """
import sys, django
from django.conf import settings
settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                          "NAME": sys.argv[2]}}, INSTALLED_APPS=[])
django.setup()
from django.db import connection, transaction
from echomq import App
from echomq.verbs import jobs

app = App(sys.argv[1])
queue = sys.argv[3]


@app.task(queue=queue)
def notify(user: int) -> None: ...


def pending():
    return int(jobs.counts(app.connector(), queue)["pending"])


with connection.cursor() as cur:
    cur.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, user INTEGER)")
with transaction.atomic():
    with connection.cursor() as cur:
        cur.execute("INSERT INTO orders (user) VALUES (1)")
    job = notify.enqueue_on_commit(1)
    assert job.startswith("JOB") and pending() == 0  # minted, not yet sent
assert pending() == 1 and jobs.get(app.connector(), queue, job)

try:
    with transaction.atomic():
        notify.enqueue_on_commit(2)
        raise RuntimeError("the view failed")
except RuntimeError:
    pass
with transaction.atomic():  # a rolled-back savepoint drops its job, the outer one sends
    kept = notify.enqueue_on_commit(3)
    try:
        with transaction.atomic():
            notify.enqueue_on_commit(4)
            raise RuntimeError("inner")
    except RuntimeError:
        pass
assert pending() == 2 and jobs.get(app.connector(), queue, kept)
notify.enqueue_on_commit(5)  # no transaction open: sent at once
assert pending() == 3
try:
    with transaction.atomic():
        notify.enqueue_on_commit(object())
except TypeError:
    pass  # a bad argument fails inside the transaction, which rolls back
else:
    raise AssertionError("no TypeError")
assert pending() == 3
app.close()
print("ok")
"""


def test_django_sends_on_commit_and_never_on_rollback(url, queue, tmp_path) -> None:
    script = tmp_path / "django_on_commit.py"
    script.write_text(DJANGO)
    done = subprocess.run([sys.executable, str(script), url, str(tmp_path / "db.sqlite3"),
                           queue], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


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


def test_sqlalchemy_a_rolled_back_savepoint_drops_only_its_own(pair, conn, queue,
                                                               engine) -> None:
    _, notify = pair
    with orm.Session(engine) as s:
        outer = notify.enqueue_on_commit(1, session=s)
        with pytest.raises(RuntimeError), s.begin_nested():
            notify.enqueue_on_commit(2, session=s)
            raise RuntimeError("the savepoint fails")
        with s.begin_nested():
            inner = notify.enqueue_on_commit(3, session=s)
        assert pending(conn, queue) == 0
        s.commit()
    assert pending(conn, queue) == 2
    assert jobs.get(conn, queue, outer) and jobs.get(conn, queue, inner)
