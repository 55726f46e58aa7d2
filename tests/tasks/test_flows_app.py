"""Flows through the task API and a real worker: app.flow, chain, group(...).then,
current_job().children(), failure policies, a parent cancelled mid-flow, a dead child
revived; on a single server and on a 3-primary cluster with the queues on different
shards."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from echomq.runtime.handler import current_job
from echomq.tasks.app import App
from echomq.tasks.canvas import chain, flow, group
from echomq.verbs import dead
from tests.support.flows import spread_queues
from tests.support.polling import wait_for
from tests.support.workers import serving


def names(request: pytest.FixtureRequest, topology: str, n: int) -> tuple[str, list[str]]:
    """(url, n queue names); on the cluster the queues' slots are on n different shards."""
    if topology == "single":
        return request.getfixturevalue("server").url, [
            "fa-" + uuid.uuid4().hex[:8] for _ in range(n)]
    return (cl := request.getfixturevalue("cluster")).url, spread_queues(cl, n, "fa-")


class Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: list[tuple[str, Any]] = []

    def add(self, what: str, value: Any) -> None:
        with self.lock:
            self.runs.append((what, value))

    def of(self, what: str) -> list[Any]:
        with self.lock:
            return [v for w, v in self.runs if w == what]


@pytest.mark.slow
@pytest.mark.parametrize("topology", ["single", "cluster"])
def test_fan_out_fan_in_depth_three_width_hundred(request, topology):
    url, (qr, qm, ql) = names(request, topology, 3)
    app = App(url)
    log = Log()

    @app.task(queue=ql)
    def fetch(page: int) -> int:
        log.add("fetch", page)
        return page * 2

    @app.task(queue=qm)
    def summarize(part: int) -> dict[str, Any]:
        kids = current_job().children()
        assert all(k.state == "completed" for k in kids)
        done = set(log.of("fetch"))
        assert all(k.value // 2 in done for k in kids)  # each child ran before the parent
        log.add("summarize", part)
        return {"part": part, "sum": sum(k.value for k in kids)}

    @app.task(queue=qr)
    async def report(month: str) -> str:
        kids = await current_job().achildren()
        log.add("report", (month, [k.value for k in kids]))
        return "ok"

    parts = [app.flow(summarize.s(i), children=[fetch.s(i * 100 + p) for p in range(100)])
             for i in range(3)]
    assert len(parts) == 3  # three independent flows, then one tree over all three queues

    root = flow(report.s("2026-11"), [
        flow(summarize.s(10 + i), [fetch.s(1000 + i * 100 + p) for p in range(100)])
        for i in range(3)]).enqueue()
    with serving(app, [qr, qm, ql], concurrency=20):
        wait_for(lambda: log.of("report"), 60, "the report")
        time.sleep(0.3)  # a parent released twice would run again within a beat or two
    assert len(log.of("fetch")) == 600 and len(set(log.of("fetch"))) == 600
    assert sorted(log.of("summarize")) == [0, 1, 2, 10, 11, 12]
    (month, sums), = log.of("report")
    assert month == "2026-11"
    assert sums == [{"part": 10 + i, "sum": sum(2 * (1000 + i * 100 + p) for p in range(100))}
                    for i in range(3)]
    info = app.job(root)  # completed: deleted by its ack under the default retention
    assert info is None or info.state == "completed"
    app.close()


def test_chain_and_group_feed_results(server):
    q = "fa-" + uuid.uuid4().hex[:8]
    app = App(server.url)
    got: list[Any] = []

    @app.task(queue=q)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(queue=q)
    async def double(x: int) -> int:
        return x * 2

    @app.task(queue=q, keep_result=60)
    def total(values: list[int], label: str) -> Any:
        got.append((label, values))
        return values

    last = chain(add.s(1, 2), double.s(), add.s(10), total.s("chain")).enqueue()
    group(*(add.s(i, i) for i in range(5))).then(total.s("group")).enqueue()
    with serving(app, [q]):
        assert app.result(last, timeout=30) == 16  # the chain's last step, waited on
        wait_for(lambda: len(got) == 2, 30, "both callbacks")
    assert dict(got) == {"chain": 16, "group": [0, 2, 4, 6, 8]}
    app.close()


def test_a_failed_child_fails_the_parent_until_it_is_revived(server):
    q = "fa-" + uuid.uuid4().hex[:8]
    app = App(server.url)
    ran: list[Any] = []
    flaky = {"fail": True}

    @app.task(queue=q, max_attempts=1)
    def part(n: int) -> int:
        if n == 3 and flaky["fail"]:
            raise RuntimeError("bad page")
        return n

    @app.task(queue=q, max_attempts=1)
    def sink(n: int) -> int:
        raise RuntimeError("a sink that always fails")

    @app.task(queue=q)
    def whole() -> None:
        ran.append(sorted((k.id, k.state, k.value) for k in current_job().children()))

    kids = [part.s(n) for n in range(5)] + [sink.s(0).on_failure("ignore"),
                                             sink.s(1).on_failure("drop")]
    root = app.flow(whole.s(), children=kids)
    with serving(app, [q]):
        wait_for(lambda: (app.job(root) or None) and app.job(root).state == "dead", 30,
                 "the parent to fail")
        info = app.job(root)
        assert info is not None and "bad page" in (info.error or "")
        assert not ran
        flaky["fail"] = False
        (bad,) = [d["id"] for d in dead.list_dead(app.connector(), q, 0, 50)
                  if d["id"] != root and d["error"] and "bad page" in d["error"]]
        dead.revive(app.connector(), q, bad)
        wait_for(lambda: ran, 30, "the parent after the revive")
        time.sleep(0.3)
    assert len(ran) == 1
    states = sorted(s for _, s, _ in ran[0])
    assert states == ["completed"] * 5 + ["dead"]  # the dropped one is left out
    app.close()


@pytest.mark.slow
def test_cancel_of_a_parent_mid_flow_cancels_its_waiting_subtree(server):
    q = "fa-" + uuid.uuid4().hex[:8]
    app = App(server.url)
    started = threading.Event()
    ran: list[str] = []

    @app.task(queue=q)
    def slow() -> None:
        started.set()
        while not current_job().cancelled:
            time.sleep(0.01)

    @app.task(queue=q)
    def leaf() -> None:
        ran.append("leaf")

    @app.task(queue=q)
    def top() -> None:
        ran.append("top")


    root = flow(top.s(), [slow.s(), flow(top.s(), [leaf.s() for _ in range(3)])]).enqueue()
    with serving(app, [q], concurrency=1):
        assert started.wait(20)
        assert app.cancel(root) == "cancelled"
        # the running child learns it at its next checkpoint; the waiting ones at once
        wait_for(lambda: {s for _, s in _tree(app, q, root)} == {"cancelled"}, 20,
                 "every node cancelled")
        time.sleep(0.3)
    assert ran == []  # neither parent ran, nor a leaf
    tree = _tree(app, q, root)
    assert tree[0] == (root, "cancelled") and len(tree) == 1 + 2 + 3
    app.close()


def _tree(app: App, queue: str, root: str) -> list[tuple[str, str | None]]:
    from echomq.verbs import flows
    t = flows.tree(app.connector(), queue, root)
    return [(n.id, n.state) for n in t.walk()]


WORKER_APP = '''
import os
import valkey
from echomq import App, current_job

app = App(os.environ["ECHOMQ_URL"])
QR, QM, QL = os.environ["T_QUEUES"].split(",")
r = valkey.Valkey.from_url(os.environ["ECHOMQ_URL"])

@app.task(queue=QL, name="fetch", lease_ms=2000)  # a killed worker's leases lapse soon
def fetch(page):
    r.hincrby(QL + ":fetched", str(page), 1)
    return page

@app.task(queue=QM, name="part", lease_ms=2000)
def part(i):
    kids = current_job().children()
    assert all(k.state == "completed" for k in kids)
    r.hincrby(QM + ":parts", str(i), 1)
    return sum(k.value for k in kids)

@app.task(queue=QR, name="report", keep_result=60, lease_ms=2000)
def report():
    r.incr(QR + ":reports")
    return sum(k.value for k in current_job().children())
'''


@pytest.mark.slow
def test_two_worker_processes_one_killed_run_every_parent_once(server, tmp_path,
                                                               monkeypatch):
    """The path a user takes: `echomq worker mod:app` twice (two workers whose beats race to carry),
    one SIGKILLed mid-flow; a depth-3 tree over 3 queues still runs every parent once."""
    import os
    import signal
    import subprocess
    import sys

    import valkey

    qs = ["fw-" + uuid.uuid4().hex[:8] for _ in range(3)]
    (tmp_path / "flow_app.py").write_text(WORKER_APP)
    env = {**os.environ, "ECHOMQ_URL": server.url, "T_QUEUES": ",".join(qs)}
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("T_QUEUES", ",".join(qs))
    monkeypatch.setenv("ECHOMQ_URL", server.url)
    monkeypatch.delitem(sys.modules, "flow_app", raising=False)
    import flow_app  # the same task definitions, for the signatures

    r = valkey.Valkey.from_url(server.url)
    procs = [subprocess.Popen([sys.executable, "-m", "echomq.cli", "worker", "flow_app:app",
                               "--log-level", "warning"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(2)]
    try:
        root = flow(flow_app.report.s(), [
            flow(flow_app.part.s(i), [flow_app.fetch.s(i * 100 + p) for p in range(100)])
            for i in range(3)]).enqueue()
        wait_for(lambda: r.hlen(qs[2] + ":fetched") >= 50, 60, "the fetches to start")
        os.kill(procs[0].pid, signal.SIGKILL)
        assert r.get(qs[0] + ":reports") is None  # killed mid-flow
        assert flow_app.app.result(root, timeout=90) == sum(range(300))
        time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)
    assert r.get(qs[0] + ":reports") == b"1"
    assert {k: int(v) for k, v in r.hgetall(qs[1] + ":parts").items()} == {
        b"0": 1, b"1": 1, b"2": 1}
    assert r.hlen(qs[2] + ":fetched") == 300  # (a fetch cut by the kill may run twice)
