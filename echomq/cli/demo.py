"""``echomq demo``: the whole job lifecycle, live, on an embedded server.

A throwaway (ephemeral) Valkey starts, an app declares four tasks, a worker runs them, and
each transition prints as a timeline line: jobs now, in and at; a task that fails on an
exponential backoff curve until it is dead-lettered; a task that delays itself without
spending a failure. It exits 0 on its own once every job has settled.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import time
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="a live tour of the job lifecycle on an embedded server")
    p.add_argument("--url", default=None,
                   help="use this server instead of a throwaway embedded one")
    p.add_argument("--timeout", type=float, default=30.0, help="give up after this many s")
    p.set_defaults(func=run)


class Timeline:
    """Prints one line per event, stamped with HOST seconds since the tour began."""

    def __init__(self) -> None:
        self.t0 = time.time()
        self.names: dict[str, str] = {}

    def line(self, what: str, job_id: str | None = None, detail: str = "") -> None:
        task = self.names.get(job_id or "", "")
        short = f"…{job_id[-6:]}" if job_id else ""
        print(f"+{time.time() - self.t0:6.3f}s  {what:<10} {task:<15} {short:<8} {detail}",
              flush=True)


def run(args: argparse.Namespace) -> int:
    from echomq.embedded.server import EmbeddedServer

    if not args.verbose:  # the timeline says it all; the worker's log lines would repeat it
        logging.getLogger("echomq").setLevel(logging.CRITICAL)
    if args.url:
        return asyncio.run(tour(args.url, args.timeout))
    with EmbeddedServer(ephemeral=True) as srv:
        print(f"embedded Valkey on {srv.host}:{srv.port} (ephemeral)", flush=True)
        return asyncio.run(tour(srv.url, args.timeout))


async def tour(url: str, timeout: float) -> int:
    from echomq.runtime.events import Event
    from echomq.runtime.handler import Delay, current_job
    from echomq.tasks.app import App
    from echomq.tasks.worker import Worker

    app = App(url)
    tl = Timeline()
    queue = f"demo-{int(time.time() * 1000) % 100_000}"

    @app.task(queue=queue, name="send_welcome")
    async def send_welcome(user: str) -> None:
        await asyncio.sleep(0.05)

    @app.task(queue=queue, name="charge_card", max_attempts=4,
              backoff=("exponential", 250, 5_000))
    def charge_card(order: int) -> None:
        raise RuntimeError(f"card declined for order {order}")

    @app.task(queue=queue, name="wait_for_stock")
    async def wait_for_stock(sku: str) -> str:
        job = current_job()
        if job is not None and job.attempts == 1:
            raise Delay(700)  # not in stock yet: come back later, no failure recorded
        return "shipped"

    @app.task(queue=queue, name="nightly_report")
    def nightly_report() -> None:
        time.sleep(0.1)

    settled: dict[str, str] = {}
    done = asyncio.Event()

    def on_event(ev: Event) -> None:
        info = ev.info
        if ev.kind == "started":
            tl.line("start", ev.job_id, f"attempt {ev.attempts}")
        elif ev.kind == "completed":
            tl.line("completed", ev.job_id)
        elif ev.kind == "retrying":
            tl.line("retry", ev.job_id,
                    f"failed attempt {ev.attempts}: {info['error']}; next run in "
                    f"{info['delay_ms']} ms (exponential 250 ms x 2^(n-1))")
        elif ev.kind == "dead":
            tl.line("DEAD", ev.job_id, f"after {ev.attempts} attempts: {info['error']}")
        elif ev.kind == "delayed":
            tl.line("delayed", ev.job_id, f"sent itself back for {info['value']} ms "
                                          "(attempts untouched)")
        elif ev.kind in ("degraded", "recovered", "lost"):
            tl.line(ev.kind, ev.job_id, str(info))
        if ev.job_id and ev.kind in ("completed", "dead"):
            settled[ev.job_id] = ev.kind
            if len(settled) == len(tl.names):
                done.set()

    conn = await app.aconnector()
    from echomq.verbs import jobs
    server_now = await jobs.server_now_ms(conn)
    print("queueing:", flush=True)
    plan = [
        ("send_welcome", await send_welcome.aenqueue("ada@example.com"), "now"),
        ("charge_card", await charge_card.aenqueue(1042), "now; always fails"),
        ("wait_for_stock", await wait_for_stock.aenqueue("SKU-7"), "now; delays itself once"),
        ("send_welcome", await send_welcome.aenqueue_in(dt.timedelta(seconds=1.5),
                                                        "grace@example.com"),
         "in 1.5 s (server clock)"),
        ("nightly_report", await nightly_report.aenqueue_at(server_now + 2_500),
         "at an absolute instant 2.5 s ahead"),
    ]
    for name, job_id, when in plan:
        tl.names[job_id] = name
        tl.line("queued", job_id, when)

    stop = asyncio.Event()
    worker = Worker(app, [queue], concurrency=5, beat_ms=100, grace_s=5, on_event=on_event)
    running = asyncio.ensure_future(worker.run(stop))
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        tl.line("timeout", None, f"{len(settled)}/{len(tl.names)} jobs settled")
    stop.set()
    await running

    dead_id = plan[1][1]
    info = await app.ajob(dead_id, queue)
    counts = await jobs.counts(conn, queue)
    print("\nthe dead job, as app.job(id) reports it:", flush=True)
    if info is not None:
        print(f"  state={info.state} attempts={info.attempts} failures={info.failures} "
              f"error={info.error!r}")
    print(f"queue {queue}: {counts}  (completed rows are deleted on ack by default;"
          " dead rows are kept 30 days)", flush=True)
    await app.aclose()
    app.close()
    ok = len(settled) == len(tl.names) and info is not None and info.state == "dead"
    return 0 if ok else 1
