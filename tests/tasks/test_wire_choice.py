"""The fast wire by default where it exists: ``App`` and the worker speak wire 6 when every
node has the EMQ module (the embedded server loads it), wire 4 otherwise, and ``wire=4|6``
chooses; the worker's start line says which and why. The low-level ``Connector`` keeps
wire 4 as its default."""

from __future__ import annotations

import asyncio

import pytest

from echomq import AsyncConnector, Connector, errors, native
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from tests.support.cli import echomq

needs_module = pytest.mark.skipif(not native.available(), reason="the EMQ module is not built")

APP = '''
import os
from echomq import App

app = App(os.environ["ECHOMQ_URL"])

@app.task(queue=os.environ["T_QUEUE"], name="noop")
def noop():
    return None
'''


@pytest.fixture(scope="module")
def bare():
    """A server without the module."""
    with EmbeddedServer(ephemeral=True, native=False) as srv:
        yield srv


@needs_module
def test_app_picks_wire_6_where_the_module_is_loaded(url, queue):
    with App(url) as app:
        assert app.wire == 6
        assert app.wire_reason == "the emq module is loaded on the server"

        @app.task(queue=queue, name="noop")
        def noop() -> None: ...

        noop.enqueue()  # EMQ.ENQUEUE: admitted as the script admits
        assert app.connector().wire == 6

        async def via_async() -> int:
            return (await app.aconnector()).wire

        assert asyncio.run(via_async()) == 6


def test_app_picks_wire_4_where_the_module_is_missing(bare, queue):
    with App(bare.url) as app:
        assert app.wire == 4
        assert app.wire_reason is not None
        assert app.wire_reason.startswith("the server has no emq module (MODULE LIST shows")

        async def via_async() -> int:
            return (await app.aconnector()).wire

        assert asyncio.run(via_async()) == 4


@needs_module
def test_wire_asked_for_wins(url, bare):
    with App(url, wire=4) as app:
        assert app.wire == 4 and app.wire_reason == "wire=4 asked for"
    with App(bare.url, wire=6) as app, pytest.raises(errors.NativeUnavailable, match="emq"):
        app.connector()
    with pytest.raises(ValueError, match="wire must be"):
        App(url, wire=5)  # type: ignore[arg-type]


@needs_module
def test_connector_keeps_wire_4_by_default_and_takes_auto(url, bare):
    with Connector.connect(url) as conn:
        assert conn.wire == 4
    with Connector.connect(url, wire="auto") as conn:
        assert (conn.wire, conn.wire_reason) == (6, "the emq module is loaded on the server")
    with Connector.connect(bare.url, wire="auto") as conn:
        assert conn.wire == 4

    async def via_async() -> tuple[int, int]:
        a = await AsyncConnector.connect(url)
        b = await AsyncConnector.connect(url, wire="auto")
        try:
            return a.wire, b.wire
        finally:
            await a.close()
            await b.close()

    assert asyncio.run(via_async()) == (4, 6)
    with pytest.raises(ValueError, match="'auto'"):
        Connector.connect(url, wire="fast")


@needs_module
def test_a_new_url_picks_again(url, bare):
    app = App(url)
    try:
        assert app.wire == 6
        app.close()
        app.url = bare.url  # the worker CLI's --url does this after loading the app
        assert app.wire == 4
    finally:
        app.close()


@pytest.mark.slow
@needs_module
def test_the_worker_start_line_says_which_wire_and_why(tmp_path, url, bare, queue):
    (tmp_path / "wapp.py").write_text(APP)
    env = {"T_QUEUE": queue}
    lines = {}
    for name, where, extra in (("native", url, ()), ("bare", bare.url, ()),
                               ("asked", url, ("--wire", "4"))):
        done = echomq("worker", "wapp:app", "--burst", "--beat-ms", "50", *extra, url=where,
                      cwd=tmp_path, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        lines[name] = next(ln for ln in done.stderr.splitlines() if " serving " in ln)
    assert "(wire 6: the emq module is loaded on the server)" in lines["native"]
    assert "(wire 4: the server has no emq module" in lines["bare"]
    assert "(wire 4: wire=4 asked for)" in lines["asked"]


@pytest.mark.slow
@needs_module
def test_a_cluster_gets_wire_6_when_every_node_has_the_module(cluster):
    from echomq.embedded.cluster import LocalCluster

    with App(cluster.url) as app:
        assert app.wire == 6
        assert app.wire_reason == "the emq module is loaded on every node of the cluster"
    with LocalCluster(masters=1, replicas=0, native=False) as plain, App(plain.url) as app:
        assert app.wire == 4
        assert app.wire_reason == "not every node of the cluster has the emq module"
