"""The native tests' fixtures: a server with the EMQ module loaded explicitly (the packaged
build, or the one ``ECHOMQ_NATIVE_MODULE`` names: an ASan build under
scripts/native-asan.sh), one per test module so a module's writes stay its own; a plain
client on it; a fresh queue name. Helpers they share (and tests/verbs/test_bulk.py borrows) are
in tests/support/native.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import valkey

from echomq import Connector, scripts
from echomq.embedded.server import EmbeddedServer
from tests.support.native import fresh_queue, start_server


@pytest.fixture(scope="module")
def srv() -> Iterator[EmbeddedServer]:
    s = start_server()
    yield s
    s.stop()


@pytest.fixture
def r(srv: EmbeddedServer) -> Iterator[valkey.Valkey]:
    client = valkey.Valkey.from_url(srv.url)
    yield client
    client.close()


@pytest.fixture
def q() -> str:
    return fresh_queue()


@pytest.fixture(scope="module")
def wires(srv: EmbeddedServer) -> Iterator[tuple[Connector, Connector]]:
    """A wire-4 (scripts) and a wire-6 (module) connector on the module's server, every
    script loaded first: a step that meets NOSCRIPT is sent again after the rest of its
    pipeline, so the first ``ack_and_claim`` on a fresh server would run its claim before
    its acks at wire 4 (and answer what the module, acking first, does not)."""
    c4 = Connector.connect(srv.url, wire=4)
    c6 = Connector.connect(srv.url, wire=6)
    for name in scripts.names():
        c4.client.script_load(scripts.source(name))
    yield c4, c6
    c4.close()
    c6.close()
