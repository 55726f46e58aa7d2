"""What the one-call-at-a-time benchmarks share: the legs' rates measured interleaved (so a
load spike on this shared machine falls on every leg alike) and the server's work per call
from ``INFO commandstats``.

Clocks: the rates read the HOST monotonic clock (``time.perf_counter``); the server's work is
the server's own accounting (µs of CPU per command)."""

from __future__ import annotations

import time
from collections.abc import Callable

import valkey

_ADMIN = ("cmdstat_config", "cmdstat_info")
_TOP = ("cmdstat_evalsha", "cmdstat_eval")


def interleaved_rates(legs: dict[str, Callable[[], object]], n: int,
                      chunk: int = 250) -> dict[str, float]:
    """Calls per second of each leg over ``n`` calls, the legs taking turns ``chunk`` calls
    at a time."""
    spent = dict.fromkeys(legs, 0.0)
    done = 0
    while done < n:
        k = min(chunk, n - done)
        for name, call in legs.items():
            t0 = time.perf_counter()
            for _ in range(k):
                call()
            spent[name] += time.perf_counter() - t0
        done += k
    return {name: n / spent[name] for name in legs}


def server_cost(admin: valkey.Valkey, call: Callable[[], object], n: int) -> tuple[float, float]:
    """(commands, µs) the server spent per call over ``n`` calls of ``call``: every command
    counts, those a script runs included; the time is the top-level commands' (a script's
    time already holds its commands'), the module's commands included."""
    admin.config_resetstat()
    for _ in range(n):
        call()
    stats = admin.info("commandstats")
    cmds = sum(v["calls"] for k, v in stats.items() if k not in _ADMIN)
    usec = sum(v["usec"] for k, v in stats.items() if k in _TOP or k.startswith("cmdstat_emq"))
    return cmds / n, usec / n
