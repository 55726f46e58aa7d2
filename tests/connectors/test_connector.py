"""Connectors against a real server: URLs, EVALSHA-first, errors, pools, threads."""

from __future__ import annotations

import asyncio
import threading

import pytest
import valkey

from echomq import AsyncConnector, Connector, scripts
from echomq.core import errors, ids
from echomq.embedded.launch import free_port
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs


def test_evalsha_first_and_noscript_fallback(run, raw, queue):
    # with a group the enqueue is the script on both wires (EMQ.ENQUEUE takes none)
    raw.script_flush()
    assert raw.script_exists(scripts.sha("enqueue")) == [False]
    assert run(jobs.enqueue, queue, ids.mint(), b"x", group="g") == "enqueued"
    assert raw.script_exists(scripts.sha("enqueue")) == [True]
    stats_before = raw.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    run(jobs.enqueue, queue, ids.mint(), b"y", group="g")
    assert raw.info("commandstats")["cmdstat_evalsha"]["calls"] == stats_before + 1


def test_batch_reloads_flushed_scripts(run, raw, queue):
    raw.script_flush()
    out = run(jobs.enqueue_many, queue, [(ids.mint(), b"x") for _ in range(10)])
    assert out == ["enqueued"] * 10
    assert raw.zcard(f"emq:{{{queue}}}:pending") == 10


def test_wire_error_when_server_is_unreachable():
    port = free_port()
    with pytest.raises(errors.WireError):
        Connector.connect(f"valkey://127.0.0.1:{port}/0", socket_connect_timeout=0.5)


def test_async_wire_error_when_server_is_unreachable():
    port = free_port()
    with pytest.raises(errors.WireError):
        asyncio.run(AsyncConnector.connect(f"valkey://127.0.0.1:{port}/0"))


def test_wrong_password_is_refused(server):
    bad = f"valkey://:wrong@127.0.0.1:{server.port}/0"
    with pytest.raises((errors.EchoMQError, valkey.exceptions.AuthenticationError)):
        Connector.connect(bad)


@pytest.mark.parametrize("url", ["localhost:6379", "http://x", 42])
def test_bad_urls(url):
    with pytest.raises(ValueError):
        Connector.connect(url)


def test_bad_wire():
    with pytest.raises(ValueError):
        Connector(valkey.Valkey(), wire=5)


def test_wire6_without_module_fails_at_connect():
    with EmbeddedServer(ephemeral=True, native=False) as srv:
        with pytest.raises(errors.NativeUnavailable, match="wire=6 needs the 'emq' module"):
            Connector.connect(srv.url, wire=6)
        with pytest.raises(errors.NativeUnavailable):
            asyncio.run(AsyncConnector.connect(srv.url, wire=6))
        conn = Connector.connect(srv.url, wire=4)
        with pytest.raises(errors.ConfigError, match="native only"):
            jobs.reschedule(conn, "q", ids.mint(), "in", 10)
        conn.close()


def test_unix_socket_with_password(tmp_path):
    sock = tmp_path / "v.sock"
    with EmbeddedServer(ephemeral=True, unix_socket=sock, password="s3cret/+") as srv:
        assert srv.url.startswith("unix://:s3cret%2F%2B@")
        conn = Connector.connect(srv.url)
        assert jobs.enqueue(conn, "q", ids.mint(), b"x") == "enqueued"
        conn.close()


def test_eight_threads_claim_each_job_exactly_once(url, queue):
    conn = Connector.connect(url, max_connections=16)
    minted = [ids.mint() for _ in range(2_000)]
    for i in range(0, len(minted), 500):
        jobs.enqueue_many(conn, queue, [(j, b"x") for j in minted[i:i + 500]])
    claimed: list[list[str]] = [[] for _ in range(8)]

    def worker(out: list[str]) -> None:
        while (c := jobs.claim(conn, queue, 60_000)) is not None:
            out.append(c.id)
            jobs.ack(conn, queue, c.id, c.token, keep=False)

    threads = [threading.Thread(target=worker, args=(o,)) for o in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [j for out in claimed for j in out]
    assert len(every) == 2_000 and set(every) == set(minted)
    assert sum(1 for out in claimed if out) > 1  # the work was really shared
    assert jobs.counts(conn, queue) == {
        "pending": 0, "scheduled": 0, "active": 0, "dead": 0, "completed": 0, "cancelled": 0
    }
    conn.close()


def test_error_texts_keep_their_err_prefix(conn):
    with pytest.raises(errors.CommandError) as exc:
        conn.call("EMQ.NOSUCH", "x")
    assert str(exc.value).startswith("ERR unknown command")
