"""A worker process's presence in the live worker registry (``verbs.workers``).

Theory of operation. ``join`` registers the worker before it claims anything. ``run`` then
keeps two small loops until its stop:

- the beat: every ``publish_ms`` it compares what runs now (the ``Held`` leases of its
  consumers) and its state with what it last published, and sends a heartbeat carrying
  the difference only when something changed, or when a heartbeat period has passed with
  nothing new (a heartbeat renews the registration for two periods). A busy worker pays
  one small script call per ``publish_ms`` at most, whatever its job rate; an idle one,
  one per heartbeat period. A heartbeat that finds its registration expired (the worker
  could not beat for two periods: an outage, a frozen host) registers again.
- the control: it blocks on its control list (``BLPOP``, a second at most and short of
  the connector's socket timeout, ``block_for``, so the socket never cuts it) and hands
  each quiet/stop request to ``on_request`` at once.

``leave`` removes the registration on a clean exit. Errors count as the server's weather
(``runtime.weather``): one line per outage, not one per try.

Clocks: the cadence is the HOST monotonic clock; every stamp the registry keeps is SERVER
ms. A running job's start (HOST wall clock) is published as SERVER ms by the offset the
last heartbeat measured (SERVER now minus the HOST clock at the reply's midpoint).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from echomq.core import errors
from echomq.runtime.beat import degraded_ms, unless_stopped
from echomq.runtime.leases import Held
from echomq.runtime.weather import Weather
from echomq.verbs import workers

#: the longest a control wait blocks (s): short of any sane socket timeout
CONTROL_WAIT_S = 1.0
WEATHER = (errors.WireError, errors.CommandError)


class Presence:
    """Keeps ``registration`` alive on ``conn`` and publishes what ``running()`` holds."""

    def __init__(self, conn: Any, registration: workers.Registration, *,
                 running: Callable[[], Iterable[Held]],
                 on_request: Callable[[str], None], publish_ms: int,
                 weather: Weather | None = None) -> None:
        self.conn = conn
        self.registration = registration
        self.running = running
        self.on_request = on_request
        self.publish_ms = max(1, publish_ms)
        self.heartbeat_ms = registration.heartbeat_ms
        self.weather = weather if weather is not None else Weather("worker")
        self.state = "running"
        self.offset_ms = 0  # SERVER ms minus HOST ms
        self.started_ms: int | None = None
        self.beats = 0  # heartbeats sent (the bench and the tests read it)
        self._published: tuple[frozenset[tuple[str, int]], str] | None = None
        self._kick = asyncio.Event()

    @property
    def id(self) -> str:
        return self.registration.id

    def set_state(self, state: str) -> None:
        """The worker is now ``state`` (``quiet``, ``stopping``): published at once."""
        if state not in workers.STATES:
            raise ValueError(f"state must be one of {', '.join(workers.STATES)}")
        self.state = state
        self._kick.set()

    async def join(self) -> int:
        """Register (again, after an expiry: with the first ``started``); SERVER ms."""
        reg = self.registration
        if self.started_ms is not None:
            reg = replace(reg, started_ms=self.started_ms)
        before = time.time()
        now = int(await workers.register(self.conn, reg))
        self._clock(before, now)
        if self.started_ms is None:
            self.started_ms = now
        self._published = (frozenset(), "running")  # the registration starts with neither
        return now

    async def leave(self) -> None:
        """Remove the registration (a clean exit); a failure is only logged."""
        try:
            await workers.unregister(self.conn, self.id)
        except errors.EchoMQError as exc:
            self.weather.log.warning("worker %s could not unregister (%s); it drops out of "
                                     "the registry within two heartbeats", self.id, exc)

    async def run(self, stop: asyncio.Event) -> None:
        """Beat and take requests until ``stop`` is set."""
        beats = asyncio.ensure_future(self._beats(stop))
        control = asyncio.ensure_future(self._control(stop))
        try:
            await asyncio.gather(beats, control)
        finally:
            for t in (beats, control):
                t.cancel()
            await asyncio.wait([beats, control], timeout=1.0)

    def busy(self) -> list[workers.Running]:
        """What runs now, as the registry shows it (starts as SERVER ms)."""
        return [workers.Running(h.job.id, h.job.queue, h.name,
                                int(h.started * 1000) + self.offset_ms, h.job.token)
                for h in self.running()]

    async def _beats(self, stop: asyncio.Event) -> None:
        publish_s = self.publish_ms / 1000
        period_s = self.heartbeat_ms / 1000
        last = time.monotonic()
        streak = 0
        while not stop.is_set():
            if not self._kick.is_set():
                await _wait_any((stop, self._kick), publish_s)
            self._kick.clear()
            held = list(self.running())
            seen = (frozenset((h.job.id, h.job.token) for h in held), self.state)
            due = time.monotonic() - last >= period_s
            if seen == self._published and not due:
                continue
            busy_changed = self._published is None or seen[0] != self._published[0]
            state_changed = self._published is None or seen[1] != self._published[1]
            try:
                before = time.time()
                renewed, now = await workers.heartbeat(
                    self.conn, self.id, self.heartbeat_ms,
                    self.busy() if busy_changed else None,
                    self.state if state_changed else None)
                if not renewed:
                    # expired while this worker could not beat: back in the registry
                    await self.join()
                    self._kick.set()
                    continue
            except WEATHER as exc:
                streak += 1
                await self._outage("worker heartbeat", exc, streak, stop)
                continue
            if streak:
                self.weather.answered("worker heartbeat")
                streak = 0
            self._clock(before, now)
            self._published = seen
            self.beats += 1
            last = time.monotonic()

    async def _control(self, stop: asyncio.Event) -> None:
        wait_s = self.conn.block_for(min(CONTROL_WAIT_S, self.heartbeat_ms / 1000))
        streak = 0
        while not stop.is_set():
            try:  # None: no request within the wait, or the stop came first
                action = await unless_stopped(
                    stop, workers.next_request(self.conn, self.id, wait_s))
            except WEATHER as exc:
                streak += 1
                await self._outage("worker control", exc, streak, stop)
                continue
            if streak:
                self.weather.answered("worker control")
                streak = 0
            if action is not None:
                self.on_request(action)

    async def _outage(self, source: str, exc: BaseException, streak: int,
                      stop: asyncio.Event) -> None:
        """An outage told to the weather (one line), then a sleep on the degraded curve,
        never longer than a heartbeat: back within a heartbeat of the server's return."""
        ms = degraded_ms(self.heartbeat_ms, streak)
        self.weather.failed(source, exc, ms)
        await self.weather.pause(min(ms, self.heartbeat_ms) / 1000, stop)

    def _clock(self, before: float, server_ms: int) -> None:
        midpoint = (before + time.time()) / 2
        self.offset_ms = server_ms - int(midpoint * 1000)


async def _wait_any(events: tuple[asyncio.Event, ...], timeout: float) -> None:
    """Wait until one of ``events`` is set, or ``timeout`` seconds (HOST monotonic)."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
