"""The sync connector's kept connection (``echomq.connectors.kept``): one pooled connection
single calls, replaced when the server closed it, never shared between threads or with a
forked child, and bypassed while busy."""

from __future__ import annotations

import os
import threading

import pytest
import valkey

from echomq import Connector
from echomq.core import errors, ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs
from tests.support.polling import wait_for


def client_id(conn: Connector) -> int:
    return int(conn.call("CLIENT", "ID"))


def test_single_calls_reuse_one_connection(url: str, queue: str) -> None:
    with Connector.connect(url) as conn:
        first = client_id(conn)
        for _ in range(5):
            jobs.enqueue(conn, queue, ids.mint(), b"x")
        assert client_id(conn) == first
        # a refusal is a reply: the connection stays in step and stays kept
        with pytest.raises(errors.KindError):
            jobs.enqueue(conn, queue, "X1", b"x")
        assert client_id(conn) == first
        assert jobs.counts(conn, queue)["pending"] == 5


def test_a_connection_the_server_closed_is_replaced_before_the_next_call(
    url: str, raw: valkey.Valkey, queue: str
) -> None:
    with Connector.connect(url) as conn:
        first = client_id(conn)
        assert raw.client_kill_filter(_id=first) == 1
        # the pool's own check would reconnect here; so does the kept connection
        assert jobs.enqueue(conn, queue, ids.mint(), b"x") == "enqueued"
        assert client_id(conn) != first


def test_a_lost_server_is_a_wire_error_then_the_next_call_reconnects() -> None:
    srv = EmbeddedServer(ephemeral=True, password="held-pw").start()
    port = srv.port
    conn = Connector.connect(srv.url)
    try:
        srv.stop()
        with pytest.raises(errors.WireError):
            jobs.enqueue(conn, "q", ids.mint(), b"x")
        again = EmbeddedServer(ephemeral=True, port=port, password="held-pw").start()
        try:
            assert jobs.enqueue(conn, "q", ids.mint(), b"x") == "enqueued"
        finally:
            again.stop()
    finally:
        conn.close()


def test_a_thread_finding_it_busy_goes_through_the_pool(url: str, queue: str) -> None:
    with Connector.connect(url) as conn:
        wake = f"emq:{{{queue}}}:test-wake"
        blocked = threading.Thread(target=conn.call, args=("BLPOP", wake, 30))
        blocked.start()
        try:
            wait_for(lambda: b"cmd=blpop" in conn.client.execute_command("CLIENT", "LIST"), 30,
                     "the BLPOP to start")
            # the kept connection is held by the BLPOP; this call must not wait behind it
            for _ in range(3):
                assert jobs.enqueue(conn, queue, ids.mint(), b"x") == "enqueued"
            assert blocked.is_alive()
        finally:
            valkey.Valkey.from_url(url).rpush(wake, "go")
            blocked.join(30)
        assert not blocked.is_alive()


def test_threads_share_a_connector(url: str, queue: str) -> None:
    with Connector.connect(url) as conn:
        def produce() -> None:
            for _ in range(200):
                jobs.enqueue(conn, queue, ids.mint(), b"x")

        threads = [threading.Thread(target=produce) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert jobs.counts(conn, queue)["pending"] == 800
        assert jobs.stats(conn, queue)["enqueued"] == 800


def test_a_forked_child_uses_its_own_connection(url: str, queue: str) -> None:
    with Connector.connect(url) as conn:
        parent = client_id(conn)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its connection id, enqueue one job, leave at once
            try:
                os.write(write, str(client_id(conn)).encode())
                jobs.enqueue(conn, queue, ids.mint(), b"child")
            finally:
                os._exit(0)
        os.close(write)
        child = int(os.read(read, 64))
        os.close(read)
        assert os.waitpid(pid, 0)[1] == 0
        assert child != parent
        assert client_id(conn) == parent  # the parent's socket was never touched
        assert jobs.enqueue(conn, queue, ids.mint(), b"parent") == "enqueued"
        assert jobs.counts(conn, queue)["pending"] == 2
