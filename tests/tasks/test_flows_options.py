"""Per-node options in the friendly layer (``task.s(...).options(...)``): priority, group,
unique, delay / run-at and retry policy, each node its own, through a real worker on a
single server and a 3-primary cluster; and the checks that refuse bad options before any
I/O."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid

import pytest

from echomq.tasks.app import App
from echomq.tasks.canvas import chain, group
from tests.support.flows import spread_queues
from tests.support.polling import wait_for
from tests.support.workers import serving


def names(request: pytest.FixtureRequest, topology: str, n: int) -> tuple[str, list[str]]:
    if topology == "single":
        return request.getfixturevalue("server").url, [
            "fo-" + uuid.uuid4().hex[:8] for _ in range(n)]
    return (cl := request.getfixturevalue("cluster")).url, spread_queues(cl, n, "fo-")


def test_options_become_the_nodes_fields_and_bad_ones_raise_before_any_io():
    app = App("valkey://127.0.0.1:1")  # never contacted

    @app.task(queue="fo-a", max_attempts=1)
    def step(x: int) -> int:
        return x

    @app.task(queue="fo-b")
    def done(xs: list[int]) -> int:
        return sum(xs)

    at = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    f = group(step.s(1).options(priority=3, group="tenant-1", delay=dt.timedelta(seconds=2),
                                unique="one", unique_for=60, max_attempts=4,
                                backoff=("fixed", 10)),
              step.options(priority=9, unique="two").s(2)).then(done.s().set(at=at))
    root = f.node()
    assert (root.mode, root.value) == ("at", int(at.timestamp() * 1000))
    a, b = root.children
    assert (a.mode, a.value, a.priority, a.group, a.unique, a.unique_for_ms) == (
        "in", 2000, 3, "tenant-1", "one", 60_000)
    assert b"\"retry\":{\"backoff\":[\"fixed\",10],\"max_attempts\":4}" in bytes(a.payload)
    assert (b.mode, b.priority, b.unique) == ("now", 9, "two")  # the bound task's options
    sig = step.s(1)
    with pytest.raises(ValueError, match="delay or at"):
        sig.options(delay=10, at=at)
    with pytest.raises(ValueError, match="priority"):
        sig.options(priority=-1)
    with pytest.raises(ValueError, match="unique_for needs"):
        sig.options(unique_for=5)
    with pytest.raises(ValueError):
        sig.options(backoff=("sometimes", 1))
    with pytest.raises(ValueError, match="max_attempts"):
        sig.options(max_attempts=0)
    with pytest.raises(TypeError):
        sig.options(group=lambda *a: "g")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delay"):
        sig.options(delay=-5)
    # a step under its own ancestor's key would wait for itself: refused before any I/O
    keyed = step.options(unique="same")
    with pytest.raises(ValueError, match="wait for itself"):
        chain(keyed.s(1), step.s(), keyed.s()).enqueue()
    assert chain(keyed.s(1), step.s()).node().children[0].unique == "same"  # no cycle


@pytest.mark.slow
@pytest.mark.parametrize("topology", ["single", "cluster"])
def test_each_node_runs_with_its_own_options(request, topology):
    url, (qr, ql) = names(request, topology, 2)
    app = App(url)
    ran: dict[str, list[float]] = {}
    lock = threading.Lock()

    def note(what: str) -> None:
        with lock:
            ran.setdefault(what, []).append(time.monotonic())

    @app.task(queue=ql, max_attempts=1, retry_delay_ms=10)
    def flaky(name: str, failures: int) -> str:
        note(name)
        if len(ran[name]) <= failures:
            raise RuntimeError(f"{name} failed")
        return name

    @app.task(queue=qr, keep_result=60)
    def gather(names_: list[str]) -> list[str]:
        note("gather")
        return names_

    began = time.monotonic()
    with serving(app, [qr, ql], pump=False):
        root = group(
            flaky.s("retried", 2).options(max_attempts=3),  # the task alone would kill it
            flaky.s("later", 0).options(delay=700),
            flaky.s("now", 0),
        ).then(gather.s().options(delay=1_200)).enqueue()
        assert app.result(root, timeout=20) == ["retried", "later", "now"]
    assert len(ran["retried"]) == 3 and len(ran["gather"]) == 1
    assert ran["later"][0] - began >= 0.7
    assert ran["gather"][0] - began >= 1.2  # its own delay, though the others ended sooner
    assert ran["now"][0] - began < 0.7


@pytest.mark.parametrize("topology", ["single", "cluster"])
def test_a_node_whose_key_a_running_job_owns_waits_for_that_job(request, topology):
    url, (qr, ql) = names(request, topology, 2)
    app = App(url)
    gate = threading.Event()
    runs: list[int] = []

    @app.task(queue=ql, keep_result=60)
    def refresh(tenant: int) -> str:
        runs.append(tenant)
        assert gate.wait(20)
        return f"fresh-{tenant}"

    @app.task(queue=qr, keep_result=60)
    def report(values: list[str]) -> list[str]:
        return values

    with serving(app, [qr, ql], pump=False):
        owner = refresh.options(unique="refresh-1").enqueue(1)
        wait_for(lambda: runs == [1], 10, "the owner running")
        root = group(refresh.s(1).options(unique="refresh-1"),
                     refresh.s(2).options(unique="refresh-2")).then(report.s()).enqueue()
        wait_for(lambda: sorted(runs) == [1, 2], 10, "tenant 2 running")
        time.sleep(0.3)
        assert sorted(runs) == [1, 2]  # tenant 1 is not run a second time
        assert app.job(root).state == "waiting-children"
        gate.set()
        # the owner's result counts as the linked node's
        assert app.result(root, timeout=20) == ["fresh-1", "fresh-2"]
    assert sorted(runs) == [1, 2]
    assert app.result(owner, timeout=5) == "fresh-1"


def test_an_awaited_flow_admits_the_same_tree_with_its_options(server):
    import asyncio

    from echomq.verbs import flows
    q = "fo-" + uuid.uuid4().hex[:8]
    app = App(server.url)

    @app.task(queue=q)
    def part(n: int) -> int:
        return n

    @app.task(queue=q)
    def whole() -> int:  # a flow's parent reads current_job().children(): no fed argument
        return 0

    async def main() -> str:
        try:
            return await app.aflow(whole.s().options(priority=4),
                                   [part.s(1).options(delay=60_000), part.s(2)])
        finally:
            await app.aclose()

    root = asyncio.run(main())
    conn = app.connector(q)
    kids = flows.children(conn, q, root)
    assert [k.state for k in kids] == [None, None]
    states = [app.job(k.id).state for k in kids]
    assert states == ["scheduled", "pending"]
    assert app.job(root).state == "waiting-children"
    with pytest.raises(ValueError, match="wait for itself"):
        keyed = part.options(unique="u")
        asyncio.run(app.aflow(keyed.s(1), [keyed.s(2)]))
    app.close()
