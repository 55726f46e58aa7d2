"""Bulk admission and memory per scheduled job (against the floor Python reaches).

Rate: N jobs admitted ``--chunk`` per round trip (1,000 by default), several ways side by
side on one embedded Valkey, ids minted before the clock starts (all write branded ids):

- ``raw``: the floor. Per job ``HSET`` row (state, attempts, payload) and one variadic
  ``ZADD`` for the chunk, packed with libvalkey's C packer and sent as one buffer on one
  valkey-py connection, replies read in C: the least client work Python can do.
- ``enqueue_many`` / ``schedule_many`` (+60 s, ``"in"``): ``echomq.verbs.jobs`` on the sync
  ``Connector``; ``aenqueue_many``: ``jobs.enqueue_many`` on an ``AsyncConnector``.

The sides' round trips alternate (a raw chunk, an ``enqueue_many`` chunk, an async one,
the next raw chunk ...), each timed alone, so load from a neighbour on a shared machine falls
on every side alike; ratios are taken within a repeat and the table shows medians. The
server's work per job comes from ``INFO commandstats`` (commands, counting those a script
runs; µs of the top-level calls).

Memory: each measurement on its own fresh server, ``used_memory`` before and after N jobs,
divided by N: EchoMQ's ``schedule_many`` (scripts loaded before the first reading, so the
figure is per job, not the first call's one-off cost: the script cache, the Lua heap; that
is printed too), and the bare layouts the same ids cost written with plain commands: the
contract's row (``state=scheduled``, ``attempts=0``, ``payload``) plus its schedule member,
and the parts alone. Host wall clock throughout.

    .venv/bin/python bench/bulk.py [--n 20000] [--chunk 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import libvalkey
import valkey

from echomq import AsyncConnector, Connector
from echomq.core import ids, keyspace
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import jobs

PAYLOAD = b'{"task":"noop","args":[]}'  # bench/systems/_common.py's job
AHEAD_MS = 60_000
QUEUE = "bench"
_ADMIN = ("cmdstat_config", "cmdstat_info", "cmdstat_config|resetstat", "cmdstat_flushall")


def _minted(n: int) -> list[str]:
    return [ids.mint() for _ in range(n)]


def _parts(jids: list[str], chunk: int) -> list[list[str]]:
    return [jids[i:i + chunk] for i in range(0, len(jids), chunk)]


class Raw:
    """The floor: HSET per job + one ZADD per chunk, packed in C, one buffer per round trip."""

    def __init__(self, client: valkey.Valkey, scheduled: bool) -> None:
        self.conn = client.connection_pool.get_connection("HSET")
        self.client = client
        self.row = keyspace.base(QUEUE) + "raw:"
        self.zset = keyspace.queue_key(QUEUE, "raw-schedule" if scheduled else "raw-pending")
        self.state = "scheduled" if scheduled else "pending"
        self.scheduled = scheduled

    def __call__(self, part: list[str]) -> None:
        pack = libvalkey.pack_command
        score = int(time.time() * 1000) + AHEAD_MS if self.scheduled else 0
        members: list[Any] = []
        buf = []
        for jid in part:
            buf.append(pack(("HSET", self.row + jid, "state", self.state, "attempts", "0",
                             "payload", PAYLOAD)))
            members += (score, jid)
        buf.append(pack(("ZADD", self.zset, *members)))
        self.conn.send_packed_command([b"".join(buf)])
        for _ in range(len(part) + 1):
            self.conn.read_response()

    def close(self) -> None:
        self.client.connection_pool.release(self.conn)


def interleaved(n: int, chunk: int, sides: dict[str, Callable[[list[str]], object]]
                ) -> dict[str, float]:
    """jobs/s of each side, their round trips alternated (one chunk each, in turn), so a
    neighbour's load on the shared machine falls on every side alike."""
    parts = {name: _parts(_minted(n), chunk) for name in sides}
    spent = dict.fromkeys(sides, 0.0)
    for i in range(len(next(iter(parts.values())))):
        for name, fn in sides.items():
            t0 = time.perf_counter()
            fn(parts[name][i])
            spent[name] += time.perf_counter() - t0
    return {name: n / spent[name] for name in sides}


def rate_phases(url: str, n: int, chunk: int) -> dict[str, float]:
    client = valkey.Valkey.from_url(url)
    conn = Connector.connect(url)
    loop = asyncio.new_event_loop()
    aconn = loop.run_until_complete(AsyncConnector.connect(url))
    jobs.enqueue_many(conn, QUEUE, [(ids.mint(), PAYLOAD)])
    jobs.schedule_many(conn, QUEUE, [(ids.mint(), PAYLOAD, "in", AHEAD_MS)])
    loop.run_until_complete(jobs.enqueue_many(aconn, QUEUE, [(ids.mint(), PAYLOAD)]))
    raw, raw_sched = Raw(client, False), Raw(client, True)

    def enqueue(part: list[str]) -> None:
        assert len(jobs.enqueue_many(conn, QUEUE, [(j, PAYLOAD) for j in part])) == len(part)

    def schedule(part: list[str]) -> None:
        out = jobs.schedule_many(conn, QUEUE, [(j, PAYLOAD, "in", AHEAD_MS) for j in part])
        assert len(out) == len(part)

    def aenqueue(part: list[str]) -> None:
        out = loop.run_until_complete(jobs.enqueue_many(aconn, QUEUE, [(j, PAYLOAD)
                                                                       for j in part]))
        assert len(out) == len(part)

    out = interleaved(n, chunk, {"raw": raw, "enqueue_many": enqueue,
                                 "aenqueue_many": aenqueue})
    out |= interleaved(n, chunk, {"raw_sched": raw_sched, "schedule_many": schedule})

    def with_options(opts: dict[str, Any]) -> Callable[[list[str]], None]:
        def admit(part: list[str]) -> None:
            out = jobs.enqueue_many(conn, QUEUE, [(j, PAYLOAD, opts) for j in part])
            assert len(out) == len(part)
        return admit

    # items with options take @admit_many (not a target: what an option costs)
    opt = interleaved(n, chunk, {"raw": raw, "priority": with_options({"priority": 5}),
                                 "group": with_options({"group": "g1"})})
    out["x_priority"], out["x_group"] = opt["priority"] / opt["raw"], opt["group"] / opt["raw"]
    m = min(n, 5000)
    for name, fn in (("raw", raw), ("enqueue_many", enqueue), ("schedule_many", schedule)):
        jids = _minted(m)
        out[f"{name}_cmds"], out[f"{name}_us"] = server_cost(
            client, lambda fn=fn, jids=jids: [fn(p) for p in _parts(jids, chunk)], m)
    raw.close()
    raw_sched.close()
    loop.run_until_complete(aconn.close())
    loop.close()
    conn.close()
    client.flushall()
    client.close()
    return out


def server_cost(admin: valkey.Valkey, fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(commands, µs) per job while ``fn`` ran: every command counts (a script's own too);
    the time is the top-level calls' (a script's time holds its commands')."""
    admin.config_resetstat()
    fn()
    stats = admin.info("commandstats")
    scripted = ("cmdstat_evalsha", "cmdstat_eval")
    calls = sum(v["calls"] for k, v in stats.items() if k not in _ADMIN)
    top = sum(v["usec"] for k, v in stats.items() if k in scripted)
    if not top:  # the raw floor runs no script: all its commands are top level
        top = sum(v["usec"] for k, v in stats.items() if k not in _ADMIN)
    return calls / n, top / n


def _used(admin: valkey.Valkey) -> int:
    return int(admin.info("memory")["used_memory"])


def memory_phases(n: int) -> dict[str, float]:
    """Bytes per job on a fresh server each: EchoMQ, then bare layouts of the same ids."""
    jids = _minted(n)
    base = keyspace.base(QUEUE)
    sched = keyspace.queue_key(QUEUE, "schedule")
    due = int(time.time() * 1000) + AHEAD_MS

    def row(jid: str) -> tuple[Any, ...]:
        return ("HSET", base + "job:" + jid, "state", "scheduled", "attempts", "0",
                "payload", PAYLOAD)

    def member(jid: str) -> tuple[Any, ...]:
        return ("ZADD", sched, due, jid)

    layouts: dict[str, Callable[[str], list[tuple[Any, ...]]]] = {
        "bare_row_member": lambda j: [row(j), member(j)],
        "bare_row": lambda j: [row(j)],
        "bare_member": lambda j: [member(j)],
        "bare_key": lambda j: [("SET", base + "job:" + j, "1")],
        # bench/systems/raw_sys.py's layout: two fields, 20-character ids (j[-20:])
        "raw_layout": lambda j: [("HSET", "raw:{bench}:job:" + j[-20:], "state", "x",
                                  "payload", PAYLOAD), ("ZADD", sched, due, j[-20:])],
    }
    out: dict[str, float] = {}
    with EmbeddedServer(ephemeral=True) as srv:
        admin = valkey.Valkey.from_url(srv.url)
        m0 = _used(admin)
        conn = Connector.connect(srv.url)
        jobs.schedule_many(conn, QUEUE, [(ids.mint(), PAYLOAD, "in", AHEAD_MS)])
        m1 = _used(admin)
        for part in _parts(jids, 1000):
            jobs.schedule_many(conn, QUEUE, [(j, PAYLOAD, "in", AHEAD_MS) for j in part])
        out["echomq"] = (_used(admin) - m1) / n
        out["echomq_with_oneoff"] = (_used(admin) - m0) / n
        out["row_usage"] = float(admin.memory_usage(base + "job:" + jids[0]) or 0)
        enc = admin.object("encoding", base + "job:" + jids[0])
        out["row_listpack"] = float(enc in (b"listpack", "listpack"))
        conn.close()
        admin.close()
    for name, cmds in layouts.items():
        with EmbeddedServer(ephemeral=True) as srv:
            admin = valkey.Valkey.from_url(srv.url)
            m0 = _used(admin)
            for part in _parts(jids, 1000):
                pipe = admin.pipeline(transaction=False)
                for j in part:
                    for c in cmds(j):
                        pipe.execute_command(*c)
                pipe.execute()
            out[name] = (_used(admin) - m0) / n
            admin.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--chunk", type=int, default=1_000, help="jobs per round trip")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-memory", action="store_true")
    a = ap.parse_args()
    runs: list[dict[str, float]] = []
    with EmbeddedServer(ephemeral=True) as srv:
        print(f"EchoMQ bulk admission, embedded Valkey pid {srv.pid}, N={a.n:,}, "
              f"{a.chunk:,} per round trip, medians of {a.repeat}", flush=True)
        for r in range(a.repeat):
            row = rate_phases(srv.url, a.n, a.chunk)
            row["x_enqueue"] = row["enqueue_many"] / row["raw"]
            row["x_schedule"] = row["schedule_many"] / row["raw_sched"]
            row["x_aenqueue"] = row["aenqueue_many"] / row["raw"]
            runs.append(row)
            print(f"  run {r + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()),
                  flush=True)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print()
    print(f"{'measure (median)':<60} {'value':>12}")
    print("-" * 73)
    for label, key, fmt in (
        ("raw HSET + ZADD pending, pipelined (jobs/s)", "raw", "{:,.0f}"),
        ("jobs.enqueue_many, sync (jobs/s)", "enqueue_many", "{:,.0f}"),
        ("  / raw (target >= 0.6x)", "x_enqueue", "{:.2f}x"),
        ("jobs.enqueue_many, async (jobs/s)", "aenqueue_many", "{:,.0f}"),
        ("  / raw (target >= 0.6x)", "x_aenqueue", "{:.2f}x"),
        ("raw HSET + ZADD schedule, pipelined (jobs/s)", "raw_sched", "{:,.0f}"),
        ("jobs.schedule_many +60 s, sync (jobs/s)", "schedule_many", "{:,.0f}"),
        ("  / raw (target >= 0.6x)", "x_schedule", "{:.2f}x"),
        ("jobs.enqueue_many, a priority per item, sync / raw", "x_priority", "{:.2f}x"),
        ("jobs.enqueue_many, a group per item, sync / raw", "x_group", "{:.2f}x"),
        ("server commands / µs per job: raw", ("raw_cmds", "raw_us"), "{:.2f} / {:.1f}"),
        ("server commands / µs per job: enqueue_many",
         ("enqueue_many_cmds", "enqueue_many_us"), "{:.2f} / {:.1f}"),
        ("server commands / µs per job: schedule_many",
         ("schedule_many_cmds", "schedule_many_us"), "{:.2f} / {:.1f}"),
    ):
        value = fmt.format(*(med[k] for k in key)) if isinstance(key, tuple) else \
            fmt.format(med[key])
        print(f"{label:<60} {value:>12}")
    if a.no_memory:
        return
    mem = memory_phases(a.n)
    print()
    print(f"{'memory per scheduled job, bytes (used_memory delta / N)':<60} {'value':>12}")
    print("-" * 73)
    for label, key in (
        ("EchoMQ schedule_many (scripts loaded first; target <= 240)", "echomq"),
        ("  the same counting the first call (script cache, Lua heap)", "echomq_with_oneoff"),
        ("bare contract: row (state, attempts, payload) + member", "bare_row_member"),
        ("  the row alone", "bare_row"),
        ("  the schedule member alone", "bare_member"),
        ("  an empty key of the row's name (SET k 1)", "bare_key"),
        ("bench/run.py's raw layout (2 fields, 20-char ids) + member", "raw_layout"),
        ("MEMORY USAGE of one EchoMQ row", "row_usage"),
        ("EchoMQ row is a listpack (1 = yes)", "row_listpack"),
    ):
        print(f"{label:<60} {mem[key]:>12,.1f}")


if __name__ == "__main__":
    main()
