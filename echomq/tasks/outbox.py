"""The transactional outbox: a job written into the caller's database transaction.

``enqueue(db, task, *args, **kwargs)`` mints the job's id, encodes its payload (the
task's app: serializer and codec) and INSERTs one row into ``echomq_outbox`` on ``db``,
the caller's connection, inside the caller's transaction: the job exists exactly when
the caller's data does (a rollback takes it away; nothing is sent to Valkey yet). The
relay (``echomq outbox relay --db URL``, or ``relay(...)``) moves rows to Valkey:

    claim a batch (PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED``, so relays can run
    side by side; SQLite: ``BEGIN IMMEDIATE``, one writer) -> admit each row under its
    minted id -> delete the batch -> commit.

A second admission of an id writes nothing (``"duplicate"``), so a relay killed after
admitting and before its commit re-admits the batch when it restarts and each job is
admitted once. Rows are claimed oldest first by the DATABASE clock (``created_ms``, read
by the INSERT: host clocks never order them), but Valkey orders claims by priority, then
mint order: a row minted earlier and committed later runs ahead of rows already relayed;
the relay never tails by id, so it never skips such a row.

Databases: ``sqlite3`` connections and PostgreSQL through ``psycopg`` (3; the
``echomq[postgres]`` extra), or an SQLAlchemy ``Session``/``Connection`` on either.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from echomq.core import ids
from echomq.verbs import jobs, registry

TABLE = "echomq_outbox"

_NOW = {  # epoch ms on the DATABASE clock
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
}
_DDL = {
    "sqlite": f"CREATE TABLE IF NOT EXISTS {TABLE} (id TEXT PRIMARY KEY, queue TEXT NOT NULL, "
              f"payload BLOB NOT NULL, priority INTEGER NOT NULL DEFAULT 0, grp TEXT, "
              f"created_ms INTEGER NOT NULL)",
    "postgresql": f"CREATE TABLE IF NOT EXISTS {TABLE} (id TEXT PRIMARY KEY, queue TEXT NOT "
                  f"NULL, payload BYTEA NOT NULL, priority INTEGER NOT NULL DEFAULT 0, "
                  f"grp TEXT, created_ms BIGINT NOT NULL)",
}


class Db(NamedTuple):
    """A caller's connection seen through one ``execute(sql, params)`` and its dialect."""

    dialect: str
    execute: Callable[[str, tuple[Any, ...]], Any]

    def sql(self, text: str) -> str:
        """``text`` with ``?`` placeholders in this driver's style."""
        return text if self.dialect == "sqlite" else text.replace("?", "%s")


def of(db: Any) -> Db:
    """The ``Db`` of a sqlite3 or psycopg connection, or an SQLAlchemy session/connection."""
    if isinstance(db, sqlite3.Connection):
        return Db("sqlite", db.execute)
    module = type(db).__module__
    if module.startswith("psycopg"):  # psycopg 3 or psycopg2: through a cursor, as both do
        def execute(sql: str, params: tuple[Any, ...]) -> Any:
            cur = db.cursor()
            cur.execute(sql, params)
            return cur

        return Db("postgresql", execute)
    if module.startswith("sqlalchemy"):
        conn = db.connection() if hasattr(db, "get_bind") else db
        name = conn.dialect.name
        if name not in _DDL:
            raise TypeError(f"outbox: {name} is not supported (SQLite, PostgreSQL)")
        return Db(name, lambda sql, params: conn.exec_driver_sql(sql, params))
    raise TypeError(f"outbox: a sqlite3 or psycopg connection or an SQLAlchemy session, "
                    f"not {type(db).__name__}")


def install(db: Any) -> None:
    """Create the outbox table on ``db`` if it is missing (in the caller's transaction)."""
    d = of(db)
    d.execute(_DDL[d.dialect], ())


def enqueue(db: Any, task: Any, *args: Any, **kwargs: Any) -> str:
    """Write one run of ``task`` into ``db``'s open transaction (the table is created if
    missing); the minted job id. Arguments are checked and encoded now: a bad one raises
    before anything is written. The task's queue, priority and group travel with it."""
    d = of(db)
    task.check(args, kwargs)
    job_id = task.admission.job_id or ids.mint()
    payload = task.payload(*args, **kwargs)
    if len(payload) > task.app.max_payload_bytes:
        raise ValueError(f"{task.name}: payload of {len(payload)} bytes is over the "
                         f"limit of {task.app.max_payload_bytes}")
    group = task.admission.group
    if callable(group):  # a group computed from the call, as an enqueue computes it
        group = group(*args, **kwargs)
    d.execute(_DDL[d.dialect], ())
    d.execute(d.sql(f"INSERT INTO {TABLE} (id, queue, payload, priority, grp, created_ms) "
                    f"VALUES (?, ?, ?, ?, ?, {_NOW[d.dialect]})"),
              (job_id, task.target_queue(), payload, task.admission.priority,
               group))
    return job_id


class Relayed(NamedTuple):
    """What one relay pass did: rows admitted, rows that were already admitted."""

    admitted: int
    duplicates: int


def connect(url: str) -> Any:
    """A connection to the outbox database at ``url`` (``sqlite:///path``,
    ``postgresql://...``), in manual transaction mode."""
    if url.startswith("sqlite:///"):
        return sqlite3.connect(url[len("sqlite:///"):], isolation_level=None, timeout=30)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - the postgres extra is missing
            raise ImportError("the outbox relay on PostgreSQL needs psycopg: "
                              "pip install 'echomq[postgres]'") from exc
        return psycopg.connect(url)
    raise ValueError(f"--db {url!r}: sqlite:///PATH or postgresql://... expected")


def relay_batch(db: Any, conn: Any, batch: int = 100, pace_s: float = 0.0) -> Relayed:
    """Claim up to ``batch`` rows, admit each under its id on ``conn`` (a Connector),
    delete them and commit; ``pace_s`` seconds between admissions (a throttle)."""
    d = of(db)
    if d.dialect == "sqlite":
        db.execute("BEGIN IMMEDIATE")
        lock = ""
    else:
        lock = " FOR UPDATE SKIP LOCKED"
    try:
        d.execute(_DDL[d.dialect], ())
        rows = list(d.execute(d.sql(
            f"SELECT id, queue, payload, priority, grp FROM {TABLE} "
            f"ORDER BY created_ms, id LIMIT ?{lock}"), (batch,)))
        admitted = duplicates = 0
        for job_id, queue, payload, priority, group in rows:
            outcome = jobs.enqueue(conn, queue, job_id, bytes(payload), priority=priority,
                                   group=group)
            registry.note(conn, queue)
            if outcome == "duplicate":
                duplicates += 1
            else:
                admitted += 1
            if pace_s:
                time.sleep(pace_s)
        for job_id, *_ in rows:
            d.execute(d.sql(f"DELETE FROM {TABLE} WHERE id = ?"), (job_id,))
    except BaseException:
        db.rollback() if d.dialect != "sqlite" else db.execute("ROLLBACK")
        raise
    db.commit() if d.dialect != "sqlite" else db.execute("COMMIT")
    return Relayed(admitted, duplicates)


def relay(db: Any, conn: Any, *, batch: int = 100, once: bool = False,
          idle_s: float = 0.5, pace_s: float = 0.0,
          report: Callable[[Relayed], None] | None = None) -> Relayed:
    """Relay batches until the outbox is empty (``once``) or forever, sleeping ``idle_s``
    (HOST clock) when it is; the totals."""
    total = Relayed(0, 0)
    while True:
        got = relay_batch(db, conn, batch, pace_s)
        total = Relayed(total.admitted + got.admitted, total.duplicates + got.duplicates)
        if report is not None and (got.admitted or got.duplicates):
            report(got)
        if not (got.admitted or got.duplicates):
            if once:
                return total
            time.sleep(idle_s)
