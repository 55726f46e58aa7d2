"""What the durable steps' tests share: a claimed job, a fresh signal key, a row's state,
where a waiting job is indexed, and the wait for the SERVER clock to pass a registration."""

from __future__ import annotations

import time
import uuid
from typing import Any

from echomq.core import ids, keyspace
from echomq.verbs import jobs
from tests.support.clients import server_ms


def held(run: Any, queue: str, payload: bytes = b"x", **options: Any) -> tuple[str, int]:
    """A fresh job, claimed: (id, token). ``run`` is the ``run`` fixture or ``Direct``."""
    jid = ids.mint()
    run(jobs.enqueue, queue, jid, payload, **options)
    c = run(jobs.claim, queue, 60_000)
    assert c is not None and c.id == jid
    return jid, c.token


def sig() -> str:
    """A fresh signal key."""
    return "approval:" + uuid.uuid4().hex[:10]


def state(raw: Any, queue: str, jid: str) -> str | None:
    got = raw.hget(keyspace.job_key(queue, jid), "state")
    return got.decode() if got is not None else None


def past_registrations(raw: Any, key: str) -> None:
    """Wait until the SERVER clock is past the newest registration on ``key``'s index: a
    signal drops the entries older than its store, and keeps one of its own ms (a tie)."""
    newest = raw.zrange(keyspace.signal_key(key, "queues"), -1, -1, withscores=True)
    while newest and server_ms(raw) <= newest[0][1]:
        time.sleep(0.001)


def wait_keys(raw: Any, queue: str, jid: str, key: str) -> tuple[bool, bool, bool]:
    """Where a waiting job is indexed: (on waiting, on deadlines, on the key's waiters)."""
    return (raw.zscore(keyspace.queue_key(queue, "waiting"), jid) is not None,
            raw.zscore(keyspace.queue_key(queue, "deadlines"), jid) is not None,
            raw.sismember(keyspace.waiters_key(queue, key), jid) == 1)


class Direct:
    """``run``'s call shape on a plain connector: ``Direct(conn)(verb, *args)``."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __call__(self, verb: Any, *args: Any, **kwargs: Any) -> Any:
        return verb(self.conn, *args, **kwargs)
