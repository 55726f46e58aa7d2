"""Wire 6 end to end, and the build's facts: what module_path() returns or says.

The verbs run through both connectors (``run`` is sync and async) on a module-loaded
server at wire 6; ``INFO commandstats`` proves which command went out.
"""

from __future__ import annotations

import asyncio
import ctypes
import pathlib
from collections.abc import Iterator

import pytest
import valkey

from echomq import AsyncConnector, Connector, native
from echomq.core import errors
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs
from tests.support.clients import Runner, server_ms
from tests.support.native import fresh_queue, start_server

FAR = 40_000_000_000_000


@pytest.fixture(scope="module")
def bare() -> Iterator[EmbeddedServer]:
    s = start_server(module=False)
    yield s
    s.stop()


@pytest.fixture(params=["sync", "async"])
def run6(request: pytest.FixtureRequest, srv: EmbeddedServer) -> Iterator[Runner]:
    r = Runner(request.param, srv.url, wire=6)
    yield r
    r.close()


def calls(client: valkey.Valkey, name: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{name}")
    return int(stats["calls"]) if stats else 0


def test_wire6_sends_native_for_schedule_promote_delay(run6: Runner, srv: EmbeddedServer) -> None:
    raw = valkey.Valkey.from_url(srv.url)
    q = fresh_queue()
    job = "JOB01" + "W" * 24
    names = ("emq.schedule", "emq.promote", "emq.delay", "emq.reschedule", "emq.claim")
    start = {n: calls(raw, n) for n in names}
    assert run6(jobs.enqueue_at, q, job, b"x", 1) == "scheduled"
    assert run6(jobs.enqueue_at, q, job, b"x", 1) == "duplicate"
    assert run6(jobs.enqueue_in, q, "JOB01" + "V" * 24, b"y", 3_600_000) == "scheduled"
    assert run6(jobs.promote, q, 10) == 1
    claim = run6(jobs.claim, q, 60_000)  # EMQ.CLAIM
    assert claim is not None and claim.id == job
    assert run6(jobs.delay, q, job, claim.token, 7, mode="at") is None
    assert run6(jobs.reschedule, q, job, "at", 8) == 1
    assert raw.zscore(jobs.keyspace.queue_key(q, "schedule"), job) == 8
    spent = {n: calls(raw, n) - start[n] for n in names}
    assert spent["emq.schedule"] == 3 and spent["emq.promote"] == 1
    assert spent["emq.delay"] == 1 and spent["emq.reschedule"] == 1
    assert spent["emq.claim"] == 1
    raw.close()


def test_wire6_refusals_map_to_errors(run6: Runner) -> None:
    q = fresh_queue()
    job = "JOB01" + "R" * 24
    with pytest.raises(errors.KindError):
        run6(jobs.enqueue_at, q, "nope", b"x", 5)
    with pytest.raises(errors.CommandError, match=r"^ERR EMQ\.SCHEDULE due must be"):
        run6(jobs.enqueue_at, q, job, b"x", -5)
    with pytest.raises(errors.GoneError, match=r"^EMQSTALE job gone$"):
        run6(jobs.delay, q, job, 1, 5)
    assert run6(jobs.enqueue_at, q, job, b"x", FAR) == "scheduled"
    with pytest.raises(errors.StaleError, match=r"^EMQSTALE delay token mismatch$"):
        run6(jobs.delay, q, job, 1, 5)
    with pytest.raises(errors.StateError, match=r"^EMQSTATE delay not active$"):
        run6(jobs.delay, q, job, 0, 5)
    assert run6(jobs.reschedule, q, "JOB01" + "Z" * 24, "in", 5) == -1
    with pytest.raises(errors.CommandError, match=r"^ERR EMQ\.RESCHEDULE due must be"):
        run6(jobs.reschedule, q, job, "at", -1)
    assert run6(jobs.promote, q, 5) == 0


def test_wire6_in_mode_prices_on_the_server_clock(run6: Runner, srv: EmbeddedServer) -> None:
    raw = valkey.Valkey.from_url(srv.url)
    q = fresh_queue()
    lo = server_ms(raw)
    run6(jobs.enqueue_in, q, "JOB01" + "C" * 24, b"x", 10_000)
    hi = server_ms(raw)
    assert lo + 10_000 <= raw.zscore(jobs.keyspace.queue_key(q, "schedule"), "JOB01" + "C" * 24)
    assert raw.zscore(jobs.keyspace.queue_key(q, "schedule"), "JOB01" + "C" * 24) <= hi + 10_000
    raw.close()


def test_reschedule_needs_wire6(srv: EmbeddedServer) -> None:
    with (
        Connector.connect(srv.url, wire=4) as c4,
        pytest.raises(errors.ConfigError, match="wire=6"),
    ):
        jobs.reschedule(c4, fresh_queue(), "JOB01" + "A" * 24, "at", 5)


def test_wire6_without_the_module_fails_at_connect(bare: EmbeddedServer) -> None:
    with pytest.raises(errors.NativeUnavailable, match="MODULE LIST"):
        Connector.connect(bare.url, wire=6)
    with pytest.raises(errors.NativeUnavailable, match="MODULE LIST"):
        asyncio.run(AsyncConnector.connect(bare.url, wire=6))
    with Connector.connect(bare.url, wire=4) as c4:  # wire 4 needs no module
        assert jobs.enqueue_at(c4, fresh_queue(), "JOB01" + "A" * 24, b"x", 5) == "scheduled"


# -- the build --------------------------------------------------------------------------


def test_module_path_is_a_loadable_plain_c_object() -> None:
    path = native.module_path()
    assert path.is_file()
    lib = ctypes.CDLL(str(path))  # no server symbols needed: the API comes through the ctx
    assert hasattr(lib, "RedisModule_OnLoad") and hasattr(lib, "ValkeyModule_OnLoad")
    assert not hasattr(lib, "emq_api_init")  # everything else stays hidden
    assert native.available()


def test_embedded_server_loads_the_module_by_default() -> None:
    assert EmbeddedServer(ephemeral=True).modules()[:1] == [str(native.module_path())]
    assert str(native.module_path()) not in EmbeddedServer(ephemeral=True, native=False).modules()


def test_module_path_says_why_when_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    monkeypatch.delenv(native.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(native, "_HERE", tmp_path)
    with pytest.raises(errors.NativeUnavailable, match="neither the EMQ module nor its sources"):
        native.module_path()
    (tmp_path / "emq.c").write_text("/* */")
    with pytest.raises(errors.NativeUnavailable, match="not built with this install"):
        native.module_path()
    (tmp_path / native.BUILD_FAILURE_NOTE).write_text("CompileError: no cc\n")
    with pytest.raises(errors.NativeUnavailable, match=r"failed at install time \(CompileError"):
        native.module_path()
    assert not native.available()
    monkeypatch.setenv(native.ENV_OVERRIDE, str(tmp_path / "nope.so"))
    with pytest.raises(errors.NativeUnavailable, match="names no file"):
        native.module_path()


def test_wire6_refusal_carries_the_local_reason(
    bare: EmbeddedServer, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """Where no module was built, connecting at wire 6 says why (not just 'load it')."""
    monkeypatch.delenv(native.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(native, "_HERE", tmp_path)
    (tmp_path / "emq.c").write_text("/* */")
    (tmp_path / native.BUILD_FAILURE_NOTE).write_text("CompileError: no cc\n")
    with pytest.raises(errors.NativeUnavailable, match=r"none to load: the C build .*no cc"):
        Connector.connect(bare.url, wire=6)
