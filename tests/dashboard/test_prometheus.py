"""``/metrics`` for operators, parsed with prometheus_client's parser: per-task runs and
run times after a known workload run by a real worker process, live workers and their
slots, group gauges, and ``echomq_up`` (0 with HTTP 200 while Valkey is away)."""

from __future__ import annotations

import os
import signal
import socket
import textwrap
from typing import Any

import pytest

from echomq import dashboard
from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import groups, jobs, workers
from tests.support.board import Client
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for

APP = textwrap.dedent('''
    import os, time
    from echomq import App

    app = App(os.environ["ECHOMQ_URL"])
    Q = os.environ["T_QUEUE"]

    @app.task(queue=Q, name="shop.ok")
    def ok(n):
        time.sleep(0.03)
        return n

    @app.task(queue=Q, name="shop.boom", max_attempts=2, retry_delay_ms=0)
    def boom():
        raise ValueError("boom")

    @app.task(queue=Q, name="shop.slow", max_attempts=2, retry_delay_ms=0, timeout=0.2)
    def slow():
        time.sleep(1)

    @app.task(queue=Q, name="shop.hold")
    async def hold(seconds):
        import asyncio
        await asyncio.sleep(seconds)
''')


def families(text: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(fams: dict[str, Any], family: str, name: str | None = None,
            **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of ``family`` named ``name`` (default: the family's) whose labels include
    ``labels``, by their full label set."""
    name = name or family
    return {tuple(sorted(s.labels.items())): float(s.value) for s in fams[family].samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())}


def one(fams: dict[str, Any], family: str, name: str | None = None, **labels: str) -> float:
    got = samples(fams, family, name, **labels)
    assert len(got) == 1, (family, labels, got)
    return next(iter(got.values()))


@pytest.mark.slow
def test_task_families_after_a_known_workload(board, conn, url, queue, tmp_path):
    (tmp_path / "shop_app.py").write_text(APP)
    from echomq.core.payload import encode

    jobs.enqueue_many(conn, queue, [(ids.mint(), encode("shop.ok", [n], {}))
                                    for n in range(4)])
    jobs.enqueue(conn, queue, ids.mint(), encode("shop.boom", [], {}))
    jobs.enqueue(conn, queue, ids.mint(), encode("shop.slow", [], {}))
    done = echomq("worker", "shop_app:app", "--burst", "--beat-ms", "50", "--grace", "5",
                  url=url, cwd=tmp_path, timeout=60,
                  env={"T_QUEUE": queue, "PYTHONPATH": os.pathsep.join(
                      [str(tmp_path), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr
    code, text = board.get("/metrics")
    assert code == 200
    fams = families(text)
    assert one(fams, "echomq_up") == 1
    runs = samples(fams, "echomq_task_runs", "echomq_task_runs_total", queue=queue)
    got = {(dict(k)["task"], dict(k)["outcome"]): v for k, v in runs.items()}
    outcomes = ("completed", "retried", "dead", "cancelled", "timed_out")
    want = {(t, o): 0.0 for t in ("shop.ok", "shop.boom", "shop.slow") for o in outcomes}
    want.update({("shop.ok", "completed"): 4, ("shop.boom", "retried"): 1,
                 ("shop.boom", "dead"): 1, ("shop.slow", "timed_out"): 1,
                 ("shop.slow", "dead"): 1})
    assert got == want
    assert {frozenset(dict(k)) for k in runs} == {frozenset({"queue", "task", "outcome"})}
    h = "echomq_task_duration_seconds"
    assert fams[h].type == "histogram"
    assert one(fams, h, h + "_count", queue=queue, task="shop.ok") == 4
    assert one(fams, h, h + "_bucket", queue=queue, task="shop.ok", le="0.025") == 0
    assert one(fams, h, h + "_bucket", queue=queue, task="shop.ok", le="0.05") == 4
    assert one(fams, h, h + "_bucket", queue=queue, task="shop.ok", le="+Inf") == 4
    assert 0.12 <= one(fams, h, h + "_sum", queue=queue, task="shop.ok") < 1.0
    # the timed-out runs took their timeout, not the second the handler slept
    assert one(fams, h, h + "_bucket", queue=queue, task="shop.slow", le="0.1") == 0
    assert one(fams, h, h + "_bucket", queue=queue, task="shop.slow", le="0.25") == 2
    assert one(fams, h, h + "_count", queue=queue, task="shop.boom") == 2
    buckets = samples(fams, h, h + "_bucket", queue=queue, task="shop.ok")
    assert {frozenset(dict(k)) for k in buckets} == {frozenset({"queue", "task", "le"})}
    # the worker exited: none left
    assert one(fams, "echomq_workers", queue=queue) == len(workers.live(conn, queue=queue))


@pytest.mark.slow
def test_a_running_worker_is_counted_with_its_slots_and_busy_one(board, conn, url, queue,
                                                                   tmp_path):
    (tmp_path / "shop_app.py").write_text(APP)
    env = {"T_QUEUE": queue,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = popen("worker", "shop_app:app", "--concurrency", "3", "--beat-ms", "50",
                 "--grace", "0.5", url=url, cwd=tmp_path, env=env)
    try:
        jobs.enqueue(conn, queue, ids.mint(), encode("shop.hold", [30], {}))

        def scraped() -> dict[str, Any] | None:
            fams = families(board.get("/metrics")[1])
            busy = samples(fams, "echomq_worker_busy_slots", queue=queue)
            return fams if list(busy.values()) == [1.0] else None

        fams = wait_for(scraped, 20, "the running job in /metrics")
        assert one(fams, "echomq_workers", queue=queue) == 1
        assert one(fams, "echomq_workers_claiming", queue=queue) == 1
        assert one(fams, "echomq_worker_slots", queue=queue) == 3
    finally:
        proc.send_signal(signal.SIGTERM)  # the held job is abandoned at the grace's end
        proc.wait(20)
    fams = families(board.get("/metrics")[1])
    assert one(fams, "echomq_workers", queue=queue) == 0


def test_workers_slots_and_busy_from_the_registry(board, conn, queue):
    other = queue + "-other"
    reg = workers.Registration(
        id=f"test-{ids.mint()[-10:]}", host=socket.gethostname(), pid=os.getpid(),
        app="shop:app", queues=(queue, other), concurrency=8, wire=4, version="test",
        heartbeat_ms=30_000, tasks={queue: ["shop.ok"]})
    workers.register(conn, reg)
    try:
        now = jobs.server_now_ms(conn)
        running = [workers.Running(ids.mint(), queue, "shop.ok", now, 1),
                   workers.Running(ids.mint(), queue, "shop.ok", now, 2),
                   workers.Running(ids.mint(), other, "x", now, 1)]
        workers.heartbeat(conn, reg.id, reg.heartbeat_ms, running)
        fams = families(board.get("/metrics")[1])
        n = len(workers.live(conn, queue=queue))
        assert n >= 1
        assert one(fams, "echomq_workers", queue=queue) == n
        assert one(fams, "echomq_workers_claiming", queue=queue) == n
        assert one(fams, "echomq_worker_slots", queue=queue) == 8 * n
        assert one(fams, "echomq_worker_busy_slots", queue=queue) == 2
        assert {frozenset(dict(k)) for k in samples(fams, "echomq_workers")} == {
            frozenset({"queue"})}
        workers.request(conn, reg.id, "quiet")
        workers.heartbeat(conn, reg.id, reg.heartbeat_ms, running, state="quiet")
        fams = families(board.get("/metrics")[1])
        assert one(fams, "echomq_workers_claiming", queue=queue) == n - 1
    finally:
        workers.unregister(conn, reg.id)
    fams = families(board.get("/metrics")[1])
    assert one(fams, "echomq_workers", queue=queue) == len(workers.live(conn, queue=queue))


def test_group_gauges(board, conn, queue):
    for tenant, n in (("acme", 3), ("globex", 1)):
        for i in range(n):
            jobs.enqueue(conn, queue, ids.mint(), encode("t", [i], {}), group=tenant)
    groups.set_limit(conn, queue, "acme", 2)
    groups.pause(conn, queue, "globex")
    assert jobs.claim(conn, queue, 30_000) is not None  # one of acme's runs
    fams = families(board.get("/metrics")[1])
    assert one(fams, "echomq_groups", queue=queue) == 2
    assert one(fams, "echomq_group_jobs", queue=queue, group="acme", state="waiting") == 2
    assert one(fams, "echomq_group_jobs", queue=queue, group="acme", state="active") == 1
    assert one(fams, "echomq_group_limit", queue=queue, group="acme") == 2
    assert samples(fams, "echomq_group_limit", queue=queue, group="globex") == {}
    assert one(fams, "echomq_group_paused", queue=queue, group="globex") == 1
    assert one(fams, "echomq_group_paused", queue=queue, group="acme") == 0


def test_up_is_zero_with_200_while_valkey_is_away():
    from echomq import Connector
    from echomq.embedded.server import EmbeddedServer

    srv = EmbeddedServer(ephemeral=True)
    srv.start()
    conn = Connector.connect(srv.url)
    httpd = dashboard.serve(conn, port=0)
    c = Client(httpd.server_address[1])
    try:
        code, text = c.get("/metrics")
        assert code == 200 and one(families(text), "echomq_up") == 1
        srv.stop()
        code, headers, text = c.request("GET", "/metrics")
        assert code == 200 and headers["content-type"].startswith("text/plain")
        fams = families(text)
        assert one(fams, "echomq_up") == 0 and set(fams) == {"echomq_up"}
    finally:
        httpd.shutdown()
        httpd.server_close()
        conn.close()
        srv.stop()
