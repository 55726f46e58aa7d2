"""How late does a blocking command's timeout fire? (why the bench's worker ends its waits)

    .venv/bin/python bench/probe_blpop.py

On a fresh embedded Valkey, times ``BLPOP`` on an empty list with a few timeouts and
prints how long after its timeout each one returned (HOST monotonic clock), then the same
wait ended from a second connection with ``CLIENT UNBLOCK`` by a local timer. Valkey checks
blocked clients' timeouts from its cron, ``hz`` times a second (10 by default), so the first
kind is up to ~1000/hz ms late and the second is one round trip late.
"""

from __future__ import annotations

import statistics
import threading
import time

import valkey

from echomq.embedded.server import EmbeddedServer

TIMEOUTS_S = (0.005, 0.02, 0.05, 0.123)
REPEAT = 5


def main() -> None:
    with EmbeddedServer(ephemeral=True, native=False) as srv:
        blocked = valkey.Valkey.from_url(srv.url)
        other = valkey.Valkey.from_url(srv.url)
        print(f"hz = {blocked.config_get('hz')['hz']}")
        print(f"{'timeout':>9} {'BLPOP timeout late (ms)':>26} {'CLIENT UNBLOCK late (ms)':>26}")
        me = blocked.client_id()
        for timeout in TIMEOUTS_S:
            by_server, by_host = [], []
            for _ in range(REPEAT):
                t0 = time.monotonic()
                blocked.blpop(["emq:probe:none"], timeout=timeout)
                by_server.append((time.monotonic() - t0 - timeout) * 1000)
                timer = threading.Timer(timeout, other.client_unblock, (me,))
                t0 = time.monotonic()
                timer.start()
                blocked.blpop(["emq:probe:none"], timeout=timeout + 1.0)
                by_host.append((time.monotonic() - t0 - timeout) * 1000)
                timer.join()
            print(f"{timeout * 1000:>7.0f}ms {statistics.median(by_server):>26.1f} "
                  f"{statistics.median(by_host):>26.1f}")


if __name__ == "__main__":
    main()
