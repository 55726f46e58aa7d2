"""An enqueue with options against one without: ``task.enqueue`` one call at a time.

Legs (each a task of its own on one ``App``, the same no-op payload): plain; a priority;
a unique key (a fresh key per call, so each is admitted); a kept result (``keep_result``:
the row's ``notify``); all three. N calls each, interleaved in chunks of 250 so a change
in the machine's load hits every leg alike; each rate is its calls over its own summed
time, and the table shows medians of ``--repeat`` rounds with each leg's ratio to the
plain leg. Then the server's work per call for each leg (``INFO commandstats``: commands,
counting those a script runs, and µs of the top-level commands), 2,000 calls each.

At wire 6 a plain enqueue is ``EMQ.ENQUEUE``; an enqueue with these options is too (with
the option tail) where the module takes them, else the enqueue script. ``--level verb``
times the verbs instead of ``task.enqueue`` (``jobs.enqueue`` / ``jobs.admit`` on the app's
sync connector, the payload and ids made before the clock starts): the wire's own cost of
the options, without the task layer (where a unique key per call means a bound task per
call, ``task.options(unique=...)``).

    .venv/bin/python bench/options.py [--n 5000] [--repeat 5] [--wire 6|4] [--level task|verb]

One fresh embedded Valkey; wall clock, host. The machine is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from collections.abc import Callable

import valkey
from measure import interleaved_rates, server_cost

from echomq import App
from echomq.embedded.server import EmbeddedServer

LEGS = ("plain", "priority", "unique", "keep_result", "all")


def tasks(app: App) -> dict[str, Callable[[], object]]:
    """One enqueue call per leg (a unique leg draws a fresh key per call)."""
    keys = itertools.count()
    noop = lambda: None  # noqa: E731
    plain = app.task(name="b.plain", queue="bench")(noop)
    prio = app.task(name="b.prio", queue="bench")(noop).options(priority=5)
    kept = app.task(name="b.kept", queue="bench", keep_result=60)(noop)
    uniq = app.task(name="b.uniq", queue="bench")(noop)
    every = app.task(name="b.all", queue="bench", keep_result=60)(noop).options(priority=5)
    return {
        "plain": plain.enqueue,
        "priority": prio.enqueue,
        "unique": lambda: uniq.options(unique=f"u{next(keys)}").enqueue(),
        "keep_result": kept.enqueue,
        "all": lambda: every.options(unique=f"a{next(keys)}").enqueue(),
    }


def verbs(app: App, n: int) -> dict[str, Callable[[], object]]:
    """One verb call per leg, its id and payload made in advance (a unique key each)."""
    from echomq.core import ids
    from echomq.verbs import jobs

    conn = app.connector()
    body = app.task(name="b.verb", queue="bench")(lambda: None).payload()
    pools = {leg: iter([ids.mint() for _ in range(n * 8)]) for leg in LEGS}
    keys = itertools.count()
    return {
        "plain": lambda: jobs.enqueue(conn, "bench", next(pools["plain"]), body),
        "priority": lambda: jobs.enqueue(conn, "bench", next(pools["priority"]), body,
                                         priority=5),
        "unique": lambda: jobs.admit(conn, "bench", next(pools["unique"]), body,
                                     unique=f"v{next(keys)}"),
        "keep_result": lambda: jobs.admit(conn, "bench", next(pools["keep_result"]), body,
                                          notify_ms=60_000),
        "all": lambda: jobs.admit(conn, "bench", next(pools["all"]), body, priority=5,
                                  unique=f"w{next(keys)}", notify_ms=60_000),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wire", type=int, choices=(4, 6), default=6)
    ap.add_argument("--level", choices=("task", "verb"), default="task")
    a = ap.parse_args()
    with EmbeddedServer(ephemeral=True, native=a.wire == 6) as srv:
        app = App(srv.url, wire=a.wire)
        calls = tasks(app) if a.level == "task" else verbs(app, a.n * (a.repeat + 2))
        for call in calls.values():
            call()  # connect, register the queue, load the scripts
        runs = [interleaved_rates(calls, a.n) for _ in range(a.repeat)]
        admin = valkey.Valkey.from_url(srv.url)
        cost = {name: server_cost(admin, call, min(a.n, 2_000)) for name, call in calls.items()}
        admin.close()
        app.close()
    what = "task.enqueue" if a.level == "task" else "jobs.enqueue / jobs.admit"
    print(f"{what} with and without options, wire {a.wire}, N={a.n:,} per leg, "
          f"medians of {a.repeat} (sync, one call at a time)")
    print(f"{'leg':12} {'calls/s':>9} {'vs plain':>9} {'per-run vs plain':>28} "
          f"{'server cmds':>12} {'server us':>10}")
    plain = [r["plain"] for r in runs]
    for name in LEGS:
        mine = [r[name] for r in runs]
        ratio = statistics.median(m / p for m, p in zip(mine, plain, strict=True))
        per = ", ".join(f"{m / p:.2f}" for m, p in zip(mine, plain, strict=True))
        print(f"{name:12} {statistics.median(mine):>9,.0f} {ratio:>8.2f}x {per:>28} "
              f"{cost[name][0]:>12.2f} {cost[name][1]:>10.1f}")


if __name__ == "__main__":
    main()
