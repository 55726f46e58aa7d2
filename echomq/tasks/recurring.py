"""What a worker does for its app's recurrences: upsert each definition as it is
(``repeat.put``: the same definition writes nothing; a template under the app's codec is
compared decoded, ``Recurrence.steady``) and start a Pump that fires them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from echomq.connectors.aconnector import AsyncConnector
from echomq.core import codecs
from echomq.runtime.pump import Pump
from echomq.runtime.weather import Weather
from echomq.tasks.declare import Recurrence
from echomq.verbs import jobs, repeat

log = logging.getLogger("echomq.worker")


async def start_pump(conn: AsyncConnector, recurrences: Sequence[Recurrence],
                     stop: asyncio.Event, beat_ms: int, weather: Weather | None = None,
                     clock: str = "host") -> tuple[Any, asyncio.Task[Any]] | None:
    """Upsert the app's registrations (``repeat.put``: same definition = no write) and
    start a Pump for their queues, ticking on its own (HOST monotonic) cadence; the
    registry's clock is the HOST's, or the server's with ``clock="server"`` (the upserts
    are then priced on it too)."""
    for r in recurrences:
        now = await jobs.server_now_ms(conn) if clock == "server" else None
        spec = r.spec
        if codecs.sealed(spec.template):  # sealed anew by this process: keep the stored one
            stored = await repeat.get(conn, r.queue, r.name)
            spec = r.steady(stored.template if stored is not None else None)
        result = await repeat.put(conn, r.queue, r.name, spec, now=now)
        log.info("recurrence %s on %s: %s", r.name, r.queue, result)
    # tick at half the shortest period (a 200 ms heartbeat fires on time), between one
    # beat and one second (cron's resolution is a minute)
    periods = [r.every_ms for r in recurrences if r.every_ms is not None]
    tick_ms = max(beat_ms, min([1000, *(p // 2 for p in periods)]))
    pump = Pump(conn, sorted({r.queue for r in recurrences}), tick_ms=tick_ms,
                legs=("promote", "repeats"), weather=weather, clock=clock)
    return pump, asyncio.ensure_future(pump.run(stop))
