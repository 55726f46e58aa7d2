"""Durability you choose: WAIT / WAITAOF riding behind an enqueue,
against a real primary + replica pair started from the embedded binary.

The failover is done by hand, as an operator or a sentinel would: SIGKILL the primary,
``REPLICAOF NO ONE`` on the replica. A replica frozen with SIGSTOP stands for one that lags.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
from collections.abc import Iterator

import pytest
import valkey

from echomq.connectors.connector import Connector
from echomq.core import errors, ids, keyspace
from echomq.core.steps import Batch, Command
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from echomq.verbs import durability, jobs


class Pair:
    def __init__(self, root: pathlib.Path) -> None:
        # the primary persists (AOF everysec, so WAITAOF has an AOF to fsync)
        self.primary = EmbeddedServer(data_dir=root / "primary", password="pw",
                                      extra_args=["--repl-diskless-sync-delay", "0"])
        self.primary.start()
        self.replica = EmbeddedServer(ephemeral=True, password="pw", extra_args=[
            "--replicaof", "127.0.0.1", str(self.primary.port), "--masterauth", "pw"])
        self.replica.start()
        self.rraw = valkey.Valkey.from_url(self.replica.url)
        for _ in range(500):
            if self.rraw.info("replication").get("master_link_status") == "up":
                break
            asyncio.run(asyncio.sleep(0.01))
        else:
            raise AssertionError("the replica never linked")

    def cut_replica(self) -> None:
        """A partition: the replica is frozen and the primary drops its link, so what the
        primary acknowledges from now on reaches no replica."""
        assert self.replica.pid is not None
        os.kill(self.replica.pid, signal.SIGSTOP)
        with valkey.Valkey.from_url(self.primary.url) as praw:
            praw.execute_command("CLIENT", "KILL", "TYPE", "replica")

    def thaw_replica(self) -> None:
        assert self.replica.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.replica.pid, signal.SIGCONT)

    def fail_over(self) -> valkey.Valkey:
        """The primary dies (SIGKILL); the replica is promoted. Its client."""
        self.primary.kill()
        self.thaw_replica()
        self.rraw.execute_command("REPLICAOF", "NO", "ONE")
        return self.rraw

    def close(self) -> None:
        self.thaw_replica()
        self.rraw.close()
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def pair(tmp_path: pathlib.Path) -> Iterator[Pair]:
    p = Pair(tmp_path)
    yield p
    p.close()


def _rows(client: valkey.Valkey, queue: str, minted: list[str]) -> int:
    pipe = client.pipeline(transaction=False)
    for jid in minted:
        pipe.exists(keyspace.job_key(queue, jid))
    return sum(pipe.execute())


@pytest.mark.slow
def test_waited_enqueues_survive_the_primarys_loss(pair: Pair):
    q = "dur"
    with App(pair.primary.url, wait_replicas=1, wait_timeout_ms=5_000) as app:
        @app.task(queue=q)
        def t(n: int) -> None: ...

        minted = [t.enqueue(i) for i in range(200)]
        minted += [t.enqueue_in(60_000, i) for i in range(20)]

        async def more() -> list[str]:
            return [await t.aenqueue(i) for i in range(50)]

        minted += asyncio.run(more())
        conn = Connector.connect(pair.primary.url)
        bulk = [ids.mint() for _ in range(300)]
        out = durability.confirmed(conn, jobs.enqueue_many.steps(q, [(j, b"x") for j in bulk]),
                                   durability.Wait(replicas=1, timeout_ms=5_000))
        assert out == ["enqueued"] * 300
        conn.close()
        minted += bulk
        promoted = pair.fail_over()  # right after the last acknowledgement
    assert _rows(promoted, q, minted) == len(minted) == 570


@pytest.mark.slow
def test_without_wait_a_lagging_replica_loses_acknowledged_enqueues(pair: Pair):
    """The contrast: acknowledged by the primary, gone after the failover; and the same
    enqueue with a wait says so instead of returning (NotDurable, the job on the primary)."""
    q = "lag"
    conn = Connector.connect(pair.primary.url)
    pair.cut_replica()
    plain = [ids.mint() for _ in range(20)]
    for jid in plain:
        assert jobs.enqueue(conn, q, jid, b"x") == "enqueued"  # acknowledged
    waited = ids.mint()
    with pytest.raises(errors.NotDurable, match=r"acknowledged by 0 of 1 replicas within "
                                                r"200 ms") as exc:
        durability.confirmed(conn, jobs.enqueue.steps(q, waited, b"x"),
                             durability.Wait(replicas=1, timeout_ms=200))
    assert exc.value.result == "enqueued" and exc.value.replicas == 0
    with App(pair.primary.url, wait_replicas=1, wait_timeout_ms=200) as app:
        @app.task(queue=q)
        def t() -> None: ...

        with pytest.raises(errors.NotDurable):
            t.enqueue()
    conn.close()
    promoted = pair.fail_over()
    assert _rows(promoted, q, plain) == 0  # all 20 acknowledged enqueues lost


@pytest.mark.slow
def test_wait_local_fsyncs_the_primarys_aof(pair: Pair, tmp_path: pathlib.Path):
    conn = Connector.connect(pair.primary.url)
    wait = durability.Wait(local=True, timeout_ms=5_000)
    jid = ids.mint()
    assert durability.confirmed(conn, jobs.enqueue.steps("loc", jid, b"x"), wait) == "enqueued"
    # WAITAOF counts replicas that fsynced their own AOF: this replica has none
    both = durability.Wait(replicas=1, local=True, timeout_ms=300)
    with pytest.raises(errors.NotDurable, match="0 of 1 replicas, local fsync done") as exc:
        durability.confirmed(conn, jobs.enqueue_in.steps("loc", ids.mint(), b"x", 1_000), both)
    assert exc.value.result == "scheduled" and exc.value.local == 1
    assert durability.confirmed(
        conn, jobs.enqueue.steps("loc", jid, b"x"), wait) == "duplicate"  # a re-send is safe
    conn.close()
    # no AOF, nothing to fsync: the server's refusal, code kept
    with EmbeddedServer(ephemeral=True) as bare:
        c = Connector.connect(bare.url)
        with pytest.raises(errors.CommandError, match=r"^ERR WAITAOF cannot be used"):
            durability.confirmed(c, jobs.enqueue.steps("loc", ids.mint(), b"x"), wait)
        c.close()


@pytest.mark.slow
def test_wait_rides_again_behind_a_reloaded_script(pair: Pair):
    """A flushed script cache re-sends the write after SCRIPT LOAD; the WAIT goes with it."""
    conn = Connector.connect(pair.primary.url)
    valkey.Valkey.from_url(pair.primary.url).script_flush()
    jid = ids.mint()
    wait = durability.Wait(replicas=1, timeout_ms=5_000)
    assert durability.confirmed(conn, jobs.enqueue.steps("re", jid, b"x"), wait) == "enqueued"
    conn.close()
    promoted = pair.fail_over()
    assert promoted.exists(keyspace.job_key("re", jid))


def test_wait_guards():
    for bad in [dict(), dict(replicas=-1), dict(replicas=1, timeout_ms=0),
                dict(replicas=1, timeout_ms=10**400)]:
        with pytest.raises(ValueError):
            durability.Wait(**bad)
    with pytest.raises(TypeError):
        durability.Wait(replicas=1, local=1)  # type: ignore[arg-type]


def test_wait_on_a_cluster_rides_the_writes_primary_and_an_unrouted_one_is_refused(cluster):
    conn = Connector.connect(cluster.url)
    try:
        # confirmed routes the WAIT to the written queue's primary (its own connection)
        assert durability.confirmed(conn, jobs.enqueue.steps("cw", ids.mint(), b"x"),
                                    durability.Wait(replicas=1)) == "enqueued"
        assert jobs.counts(conn, "cw")["pending"] == 1
        # a bare WAIT with no route could land on another node: refused before sending
        bare = Batch((jobs.enqueue.steps("cw2", ids.mint(), b"x").send(None),
                      Command(("WAIT", 1, 100))))
        with pytest.raises(errors.ConfigError, match="needs a route"):
            conn.execute(bare)
        assert jobs.counts(conn, "cw2")["pending"] == 0
    finally:
        conn.close()
