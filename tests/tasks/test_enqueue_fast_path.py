"""The per-call ``task.aenqueue`` path: the payload built without copies is the
same bytes as ``payload.encode`` and fails the same way; the connector found without an
await is the app's connector for the running loop, and never one the app closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import valkey

from echomq import App
from echomq.core.payload import encode, encode_call

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((1, "two", [3.5, None], {"b": 1, "a": (2,)}), {}),
    ((), {"z": 1, "a": [True, False]}),
    (("é\u2028", {"nested": {"k": "v"}}), {"x": "y"}),
    ((1.5, -0.0, 2 ** 70, 1e300, True, None), {"b": 1, "a": 2}),
]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_encode_call_writes_the_same_bytes_as_encode(args: tuple[Any, ...],
                                                     kwargs: dict[str, Any]) -> None:
    assert encode_call("t.name", args, kwargs) == encode("t.name", args, kwargs)


CYCLE: list[Any] = []
CYCLE.append(CYCLE)


@pytest.mark.parametrize(("args", "kwargs"), [
    ((object(),), {}), ((), {"k": float("nan")}), ((1, complex(1, 2)), {}), ((CYCLE,), {}),
    (({(1, 2): 3},), {}), (({1: 2, "a": 3},), {}), ((), {"deep": [[[]]] * 3, "c": CYCLE}),
])
def test_encode_call_fails_as_encode_fails(args: tuple[Any, ...],
                                           kwargs: dict[str, Any]) -> None:
    with pytest.raises(TypeError) as fast:
        encode_call("t.name", args, kwargs)
    with pytest.raises(TypeError) as slow:
        encode("t.name", args, kwargs)
    assert str(fast.value) == str(slow.value)


def test_a_non_str_name_is_refused_as_encode_refuses_it() -> None:
    with pytest.raises(TypeError, match="task must be a str"):
        encode_call(7, (), {})  # type: ignore[arg-type]


def test_aenqueue_writes_the_payload_and_reuses_only_a_live_connector(url: str,
                                                                       queue: str) -> None:
    app = App(url)
    task = app.task(name="fast.path", queue=queue)(lambda *a, **k: None)
    client = valkey.Valkey.from_url(url)

    async def once() -> tuple[str, Any, Any]:
        assert app.aconnector_ready(queue) is None  # nothing made on this loop yet
        job_id = await task.aenqueue(1, k="v")
        ready = app.aconnector_ready(queue)
        assert ready is await app.aconnector(queue)
        await task.aenqueue()
        await app.aclose()
        assert app.aconnector_ready(queue) is None  # the closed one is never handed out
        return job_id, ready, await app.aconnector(queue)

    try:
        job_id, first, _ = asyncio.run(once())
        job_id2, second, _ = asyncio.run(once())  # a new loop: a new connector
        assert first is not second
        for jid in (job_id, job_id2):
            assert client.hget(f"emq:{{{queue}}}:job:{jid}", "payload") == encode(
                "fast.path", (1,), {"k": "v"})
    finally:
        client.close()
        app.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_flat_job_with_options_is_one_native_admission(url: str, raw: valkey.Valkey,
                                                         queue: str, kind: str) -> None:
    """A priority, a unique key or a kept result (no group, one partition): the task sends
    one jobs.admit_now with its options made once, at wire 6 one EMQ.ENQUEUE per call, and
    writes what the general admission writes."""
    from echomq import native
    from echomq.verbs import jobs

    if not native.available():
        pytest.skip("the EMQ module is not built")
    app = App(url)
    try:
        urgent = app.task(name="t.urgent", queue=queue)(lambda x: x).options(priority=3)
        kept = app.task(name="t.kept", queue=queue, keep_result=60)(lambda x: x)
        once = app.task(name="t.once", queue=queue)(lambda x: x)

        def enqueue(task: Any, *args: Any) -> str:
            if kind == "sync":
                return str(task.enqueue(*args))

            async def go() -> str:
                return str(await task.aenqueue(*args))

            return asyncio.run(go())

        before = int(raw.info("commandstats").get("cmdstat_emq.enqueue", {}).get("calls", 0))
        a = enqueue(urgent, 1)
        b = enqueue(kept, 2)
        c = enqueue(once.options(unique="k1", unique_for=60), 3)
        d = enqueue(once.options(unique="k1"), 4)  # the live owner's id, nothing written
        after = int(raw.info("commandstats")["cmdstat_emq.enqueue"]["calls"])
        assert app.wire == 6 and after - before == 4
        assert d == c
        assert raw.hget(f"emq:{{{queue}}}:job:{a}", "priority") == b"3"
        assert raw.hget(f"emq:{{{queue}}}:job:{b}", "notify") == b"60000"
        assert raw.hget(f"emq:{{{queue}}}:job:{c}", "unique") == b"k1"
        assert raw.get(f"emq:{{{queue}}}:unique:k1") == c.encode()
        assert jobs.counts(app.connector(), queue)["pending"] == 3
        with pytest.raises(TypeError, match=r"jobs\.Options"):
            jobs.admit_now(app.connector(), queue, "JOB01X", b"x", {"priority": 1})
    finally:
        app.close()
