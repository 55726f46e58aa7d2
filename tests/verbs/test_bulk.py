"""The bulk admission scripts: one command per job, the same writes on every server.

``enqueue_many``, ``schedule_many`` and ``admit_many``'s items without options write each
row with one ``HSETEX NX`` where the server has it (Valkey 9) and ``EXISTS`` + ``HSET``
where it does not (a stock Redis 7), and share one variadic ``ZADD``, one wake token and
one counter bump per call. Both paths must leave the same keys and give the same per-item
outcomes (a row that exists, an id repeated inside one call, a live unique key's owner).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import valkey

from echomq import Connector
from echomq.core import keyspace
from echomq.verbs import jobs
from tests.support.native import REDIS7, fresh_queue, snapshot, start_server

N = jobs.CHUNK + 3  # spans two script calls


def _id(prefix: str, i: int) -> str:
    # fixed ids, so two servers' keyspaces compare key by key (mint order = i order)
    return f"JOB01{prefix}{i:023d}"


def workload(url: str, q: str) -> dict[str, Any]:
    """Every bulk verb with duplicates of each kind; the outcomes, by call."""
    e, s, a = ([_id(p, i) for i in range(N)] for p in "EST")
    with Connector.connect(url) as conn:
        out: dict[str, Any] = {"seed": jobs.enqueue(conn, q, e[2], b"first")}
        # e[2] has a row; e[5] appears twice in the call (the second is a duplicate)
        out["enqueue_many"] = jobs.enqueue_many(
            conn, q, [(j, f"e{i}".encode()) for i, j in enumerate(e)] + [(e[5], b"again")])
        out["schedule_many"] = jobs.schedule_many(
            conn, q, [(j, b"s", "at", 1_000 + i) for i, j in enumerate(s)]
            + [(e[7], b"taken", "at", 9), (s[1], b"again", "at", 9)])
        items: list[tuple[Any, ...]] = [(j, b"a", "now" if i % 2 else "at", 50 + i)
                                        for i, j in enumerate(a[:20])]
        items += [
            (a[20], b"u", "now", 0, {"unique": "k1"}),
            (a[21], b"u", "now", 0, {"unique": "k1"}),  # k1's owner is a[20], admitted above
            (a[22], b"p", "now", 0, {"priority": 7}),
            (a[23], b"g", "now", 0, {"group": "gr"}),
            (a[24], b"d", "at", 77, {"priority": 3}),
            (a[3], b"dup", "now", 0),                      # a plain repeat of an earlier item
            (s[4], b"dup", "at", 5, {"priority": 1}),       # an options item on a taken id
        ]
        out["admit_many"] = [tuple(x) for x in jobs.admit_many(conn, q, items)]
    return out


def test_bulk_outcomes_and_rows_are_exact(server):
    client = valkey.Valkey.from_url(server.url)
    q = fresh_queue()
    out = workload(server.url, q)
    e, s, a = ([_id(p, i) for i in range(N)] for p in "EST")
    assert out["enqueue_many"] == ["enqueued"] * 2 + ["duplicate"] + ["enqueued"] * (N - 3) + [
        "duplicate"]
    assert out["schedule_many"] == ["scheduled"] * N + ["duplicate", "duplicate"]
    assert out["admit_many"] == [
        *[("enqueued" if i % 2 else "scheduled", j) for i, j in enumerate(a[:20])],
        ("enqueued", a[20]), ("duplicate", a[20]), ("enqueued", a[22]), ("enqueued", a[23]),
        ("scheduled", a[24]), ("duplicate", a[3]), ("duplicate", s[4])]
    snap = snapshot(client, q)
    pending = snap["pending"][1]
    assert pending == {**{j: 0.0 for j in e}, **{a[i]: 0.0 for i in range(1, 20, 2)},
                       a[20]: 0.0, a[22]: 7.0}
    assert snap["schedule"][1] == {**{j: 1_000.0 + i for i, j in enumerate(s)},
                                   **{a[i]: 50.0 + i for i in range(0, 20, 2)}, a[24]: 77.0}
    assert snap["g:gr:pending"] == ("zset", {a[23]: 0.0})
    # a row that existed, or came first in the call, keeps what it had
    assert snap["job:" + e[2]] == ("hash", {"state": b"pending", "attempts": b"0",
                                            "payload": b"first"})
    assert snap["job:" + e[5]][1]["payload"] == b"e5"
    assert snap["job:" + e[7]][1]["state"] == b"pending"
    assert snap["job:" + s[1]] == ("hash", {"state": b"scheduled", "attempts": b"0",
                                            "payload": b"s"})
    assert snap["job:" + s[4]][1] == {"state": b"scheduled", "attempts": b"0", "payload": b"s"}
    assert snap["job:" + a[3]][1]["payload"] == b"a"
    assert snap["job:" + a[22]][1] == {"state": b"pending", "attempts": b"0", "payload": b"p",
                                       "priority": b"7"}
    admitted = 1 + (N - 1) + N + 24  # the first enqueue, then each call's admissions
    assert snap["stats"] == ("hash", {"enqueued": str(admitted).encode()})
    assert snap["wake"] == ("list", [b"1"])
    # the plain row is the contract's three fields, kept a listpack (memory per job)
    for j in (e[0], s[0], a[0], a[1]):
        assert client.object("encoding", keyspace.job_key(q, j)) == b"listpack"
    client.close()


# In CI .ci/run installs Debian's redis-server, so there a missing binary fails the test.
@pytest.mark.skipif(
    not REDIS7.exists() and not os.environ.get("CI"), reason="no stock redis-server at /usr/bin"
)
def test_a_server_without_hsetex_gets_the_same_keys_and_outcomes(server):
    client = valkey.Valkey.from_url(server.url)
    q = fresh_queue()
    on_valkey = workload(server.url, q)
    want = snapshot(client, q)
    client.close()
    srv = start_server(binary=str(REDIS7), module=False)
    try:
        old = valkey.Valkey.from_url(srv.url)
        with pytest.raises(valkey.exceptions.ResponseError):  # the path under test
            old.execute_command("HSETEX", "k", "NX", "FIELDS", 1, "f", "v")
        assert workload(srv.url, q) == on_valkey
        assert snapshot(old, q) == want
        old.close()
    finally:
        srv.stop()
