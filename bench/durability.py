"""What durability costs: enqueues/s under each choice.

Every row runs on fresh servers from the embedded binary, persistent (AOF) in a temp dir:

- ``everysec``   AOF fsynced once a second (the default)
- ``always``     AOF fsynced before every reply (``durability="always"``)
- ``WAITAOF 1 0`` everysec, but each enqueue waits for its own local fsync (``Wait(local=True)``)
- ``WAIT 1``     everysec primary + one replica, each enqueue waits for the replica
                 (``App(wait_replicas=1)``)

Each is measured with one producer doing one enqueue at a time (sync ``Connector``: the
latency a request handler pays) and with ``--inflight`` concurrent enqueues on one
``AsyncConnector`` (where the server can fsync many writes at once).

    .venv/bin/python bench/durability.py [--n 2000] [--inflight 32]

Wall-clock timings on a shared machine: noisy; compare within a run. The fsync cost depends
entirely on the disk under the temp dir (``TMPDIR``): print ``df`` of it with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator

from echomq import AsyncConnector, Connector
from echomq.core import ids
from echomq.embedded.server import EmbeddedServer
from echomq.verbs import durability, jobs

PAYLOAD = b'{"args":[1,"x"],"kwargs":{},"task":"bench.send"}'


@contextlib.contextmanager
def servers(fsync: str, replica: bool) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="emq-dur-") as root:
        primary = EmbeddedServer(data_dir=f"{root}/p", durability=fsync, native=False,
                                 extra_args=["--repl-diskless-sync-delay", "0"])
        primary.start()
        rep = None
        try:
            if replica:
                rep = EmbeddedServer(ephemeral=True, native=False, extra_args=[
                    "--replicaof", "127.0.0.1", str(primary.port),
                    "--masterauth", primary.password])
                rep.start()
                c = Connector.connect(rep.url)
                while c.call("INFO", "replication").get("master_link_status") != "up":
                    time.sleep(0.01)
                c.close()
            yield primary.url
        finally:
            if rep is not None:
                rep.stop()
            primary.stop()


def one_at_a_time(url: str, n: int, wait: durability.Wait | None) -> tuple[float, list[float]]:
    conn = Connector.connect(url)
    lat: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        jid = ids.mint()
        if wait is None:
            jobs.enqueue(conn, "bench", jid, PAYLOAD)
        else:
            durability.confirmed(conn, jobs.enqueue.steps("bench", jid, PAYLOAD), wait)
        lat.append(time.perf_counter() - t)
    took = time.perf_counter() - t0
    conn.close()
    return n / took, lat


def concurrent(url: str, n: int, inflight: int, wait: durability.Wait | None) -> float:
    async def main() -> float:
        conn = await AsyncConnector.connect(url, max_connections=inflight)
        left = n

        async def producer() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                jid = ids.mint()
                if wait is None:
                    await jobs.enqueue(conn, "bench", jid, PAYLOAD)
                else:
                    await durability.confirmed(
                        conn, jobs.enqueue.steps("bench", jid, PAYLOAD), wait)

        t0 = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(inflight)))
        took = time.perf_counter() - t0
        await conn.close()
        return n / took

    return asyncio.run(main())


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2_000)
    ap.add_argument("--inflight", type=int, default=32)
    a = ap.parse_args()
    rows: list[tuple[str, str, bool, durability.Wait | None]] = [
        ("everysec", "everysec", False, None),
        ("always", "always", False, None),
        ("everysec + WAITAOF 1 0", "everysec", False, durability.Wait(local=True)),
        ("everysec + replica, WAIT 1", "everysec", True, durability.Wait(replicas=1)),
    ]
    print(f"{a.n} enqueues per cell; concurrent = {a.inflight} in flight on one "
          f"AsyncConnector; temp dir {tempfile.gettempdir()}")
    head = (f"{'durability':<28} {'1-at-a-time/s':>14} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'concurrent/s':>13} {'vs everysec':>12}")
    print(head)
    print("-" * len(head))
    base: float | None = None
    for label, fsync, replica, wait in rows:
        with servers(fsync, replica) as url:
            seq, lat = one_at_a_time(url, a.n, wait)
            conc = concurrent(url, a.n, a.inflight, wait)
        base = base or seq
        print(f"{label:<28} {seq:>14,.0f} {ms(lat, 50):>8.2f} {ms(lat, 99):>8.2f} "
              f"{conc:>13,.0f} {seq / base:>11.2f}x", flush=True)


if __name__ == "__main__":
    main()
