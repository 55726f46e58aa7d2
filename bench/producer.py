"""The producer path: one call per job against the floor of one round trip.

Sync: ``task.enqueue`` side by side with a bare ``EVALSHA`` of a one-line script and a
``PING`` on the same valkey-py client, N calls each, one at a time, interleaved in chunks
of 250 (``--wire 6``: the app at wire 6, so an enqueue is ``EMQ.ENQUEUE``); plus the server's work
per enqueue from ``INFO commandstats`` (commands, counting those a script runs, and µs).
Async: N ``task.aenqueue`` spread over C concurrent tasks on one ``AsyncConnector`` beside
raw valkey-py pipelines of the same number of ``EVALSHA`` calls (the pipelined floor), and
the latency of one awaited ``aenqueue`` at a time (light load: p50/p99).

    .venv/bin/python bench/producer.py [--n 20000] [--repeat 5] [--concurrency 100]

Each phase runs ``--repeat`` times, interleaved, on one fresh embedded Valkey; the table
shows medians (the machine is shared: single runs swing ±20 %). Wall clock, host.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import valkey
import valkey.asyncio as avalkey
from measure import interleaved_rates, server_cost

from echomq import App, AsyncConnector, scripts
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs

ONE_LINE = "return 1"


def sync_phases(url: str, n: int, wire: int = 4, chunk: int = 250) -> dict[str, float]:
    """PING, bare EVALSHA and ``task.enqueue``, N calls each, interleaved ``chunk`` calls
    at a time (ping, evalsha, enqueue, ping, ...) so a change in the machine's load hits
    the three alike; each rate is its calls over its own summed time."""
    client = valkey.Valkey.from_url(url)
    sha = client.script_load(ONE_LINE)
    app = App(url, wire=wire)
    task = app.task(name="bench.noop", queue="bench")(lambda: None)
    task.enqueue()  # connect, register the queue, load the script
    # the floor of the enqueue's own writes: the command task.enqueue sends (EVALSHA of
    # the enqueue script, or EMQ.ENQUEUE at wire 6), built before the clock starts
    base, body = "emq:{bench}:", task.payload()
    head = (("EMQ.ENQUEUE",) if wire == 6 else ("EVALSHA", scripts.sha("enqueue")))
    prepared = iter([(*head, 2, f"{base}job:{j}", f"{base}pending", j, body)
                     for j in (ids.mint() for _ in range(n))])
    legs: dict[str, Callable[[], object]] = {
        "ping": client.ping,
        "evalsha": lambda: client.evalsha(sha, 0),
        "raw_enqueue": lambda: client.execute_command(*next(prepared)),
        "enqueue": task.enqueue,
    }
    out = interleaved_rates(legs, n, chunk)
    admin = valkey.Valkey.from_url(url)
    m = min(n, 5000)
    out["cmds"], out["usec"] = server_cost(admin, task.enqueue, m)
    client.close()
    admin.close()
    app.close()
    return out


async def _async_phases(url: str, n: int, conc: int, light: int) -> dict[str, float]:
    app = App(url)
    task = app.task(name="bench.noop", queue="bench")(lambda: None)
    await task.aenqueue()
    raw = avalkey.Valkey.from_url(url)
    sha = await raw.script_load(ONE_LINE)
    # the same verb on a connector without auto-pipelining: today's behaviour, same run
    off = await AsyncConnector.connect(url, auto_pipeline=False)
    body = task.payload()

    async def producer(k: int) -> None:
        for _ in range(k):
            await task.aenqueue()

    async def producer_off(k: int) -> None:
        for _ in range(k):
            await jobs.enqueue(off, "bench", ids.mint(), body)

    # the verb alone on an auto-pipelined connector: the connector's share of the cost,
    # without the task layer (payload, options, app connector lookup)
    verb_on = await AsyncConnector.connect(url)

    async def producer_verb(k: int) -> None:
        for _ in range(k):
            await jobs.enqueue(verb_on, "bench", ids.mint(), body)

    per = n // conc
    t0 = time.perf_counter()
    await asyncio.gather(*(producer(per) for _ in range(conc)))
    concurrent = per * conc / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    await asyncio.gather(*(producer_off(per) for _ in range(conc)))
    concurrent_off = per * conc / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    await asyncio.gather(*(producer_verb(per) for _ in range(conc)))
    concurrent_verb = per * conc / (time.perf_counter() - t0)
    await verb_on.close()

    t0 = time.perf_counter()
    for i in range(0, n, conc):
        pipe = raw.pipeline(transaction=False)
        for _ in range(min(conc, n - i)):
            pipe.evalsha(sha, 0)
        await pipe.execute()
    pipelined = n / (time.perf_counter() - t0)

    on_lat, off_lat = [], []
    on = await app.aconnector("bench")
    for _ in range(light):  # alternated, so drift hits both alike
        for conn, into in ((on, on_lat), (off, off_lat)):
            t = time.perf_counter()
            await jobs.enqueue(conn, "bench", ids.mint(), body)
            into.append((time.perf_counter() - t) * 1e6)
    await raw.aclose()
    await off.close()
    await app.aclose()
    app.close()
    return {"aenqueue_c": concurrent, "aenqueue_c_off": concurrent_off,
            "verb_c": concurrent_verb,
            "raw_pipelined": pipelined,
            "p50_us": _pct(on_lat, 0.5), "p99_us": _pct(on_lat, 0.99),
            "p50_us_off": _pct(off_lat, 0.5), "p99_us_off": _pct(off_lat, 0.99)}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--light", type=int, default=2_000, help="calls for the latency phase")
    ap.add_argument("--wire", type=int, default=4, choices=(4, 6))
    ap.add_argument("--only", choices=("sync", "async"), default=None)
    a = ap.parse_args()
    runs: list[dict[str, float]] = []
    with EmbeddedServer(ephemeral=True, native=a.wire == 6) as srv:
        print(f"EchoMQ producer path, embedded Valkey pid {srv.pid}, N={a.n}, "
              f"wire {a.wire} (sync), medians of {a.repeat}", flush=True)
        for r in range(a.repeat):
            row: dict[str, float] = {}
            if a.only in (None, "sync"):
                row |= sync_phases(srv.url, a.n, a.wire)
            if a.only in (None, "async"):
                row |= asyncio.run(_async_phases(srv.url, a.n, a.concurrency, a.light))
            runs.append(row)
            print(f"  run {r + 1}: " + ", ".join(f"{k} {v:,.1f}" for k, v in row.items()),
                  flush=True)
            valkey.Valkey.from_url(srv.url).flushall()
    for r in runs:  # ratios within each run, then their median: drift hits both sides
        if "enqueue" in r:
            r["x_evalsha"] = r["enqueue"] / r["evalsha"]
            r["x_raw"] = r["raw_enqueue"] / r["evalsha"]
        if "aenqueue_c" in r:
            r["x_pipelined"] = r["aenqueue_c"] / r["raw_pipelined"]
            r["x_pipelined_off"] = r["aenqueue_c_off"] / r["raw_pipelined"]
            r["x_pipelined_verb"] = r["verb_c"] / r["raw_pipelined"]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print()
    print(f"{'measure (median)':<52} {'value':>12}")
    print("-" * 65)
    if "enqueue" in med:
        print(f"{'sync PING, one call at a time (calls/s)':<52} {med['ping']:>12,.0f}")
        print(f"{'sync bare EVALSHA return 1 (calls/s)':<52} {med['evalsha']:>12,.0f}")
        print(f"{'sync raw enqueue command, prepared args (calls/s)':<52} "
              f"{med['raw_enqueue']:>12,.0f}")
        print(f"{'  / bare EVALSHA (the floor of the writes)':<52} "
              f"{med['x_raw']:>11.2f}x")
        print(f"{'sync task.enqueue (calls/s)':<52} {med['enqueue']:>12,.0f}")
        print(f"{'  / bare EVALSHA (target >= 0.8x)':<52} "
              f"{med['x_evalsha']:>11.2f}x")
        print(f"{'server commands per enqueue':<52} {med['cmds']:>12.2f}")
        print(f"{'server µs per enqueue (target <= 15)':<52} {med['usec']:>12.1f}")
    if "aenqueue_c" in med:
        c = a.concurrency
        rows = [
            (f"aenqueue over {c} tasks, auto-pipelined (calls/s)", f"{med['aenqueue_c']:,.0f}"),
            (f"jobs.enqueue over {c} tasks, auto_pipeline=False", f"{med['aenqueue_c_off']:,.0f}"),
            (f"raw EVALSHA pipelined {c} a trip (calls/s)", f"{med['raw_pipelined']:,.0f}"),
            ("  auto-pipelined / raw pipelined (target >= 0.5x)", f"{med['x_pipelined']:.2f}x"),
            ("  auto_pipeline=False / raw pipelined", f"{med['x_pipelined_off']:.2f}x"),
            (f"jobs.enqueue over {c} tasks, auto-pipelined", f"{med['verb_c']:,.0f}"),
            ("  / raw pipelined (the connector without the task layer)",
             f"{med['x_pipelined_verb']:.2f}x"),
            ("one call at a time, auto-pipelined: p50 / p99 (µs)",
             f"{med['p50_us']:,.0f} / {med['p99_us']:,.0f}"),
            ("one call at a time, auto_pipeline=False: p50 / p99",
             f"{med['p50_us_off']:,.0f} / {med['p99_us_off']:,.0f}"),
        ]
        for label, value in rows:
            print(f"{label:<52} {value:>12}")


if __name__ == "__main__":
    main()
