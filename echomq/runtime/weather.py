"""The server's weather as one process logs it: one WARNING when an outage starts, one INFO
when it ends.

Every loop of a worker (each consumer's claims and legs, the Metronome, the lease
checkpoints, the registry heartbeat) meets the same outage at about the same time, and
each retries on its own backoff curve. Logged per loop and per retry, a six-second outage
printed dozens of lines. Instead they all report to one ``Weather``: the first failure of
an outage logs a WARNING naming the error and the loop that met it, later failures log at
DEBUG, and the first of them to answer again ends the outage: one INFO with its length,
from the first failure to that first answer (the server is back: waiting for every loop
that failed would time the slowest one's backoff or its call stuck in a socket timeout,
and logged a 20 s blackhole as 26 s, 11 s after the network returned). That first answer
wakes the others from their backoff sleeps (``pause``), so they try at once. The process
stays ``degraded`` until every loop that failed has answered (on a cluster with one node
down, the loops of the healthy nodes never failed and change nothing).
A failure soon after a recovery (a pooled connection that broke in the outage fails once
when next used) continues the same outage instead of starting a new one, so it logs
nothing.

Clock: the HOST monotonic clock (how long the outage lasted, the relapse window).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

log = logging.getLogger("echomq.worker")

#: a failure within this many seconds of a recovery continues the same outage, silently
RELAPSE_S = 5.0


class Weather:
    """What one process's loops report about the server: ``failed`` and ``answered``, each
    naming its loop (``source``). The outage starts with the first loop that fails and its
    line ends with the first failed loop that answers again; ``degraded`` holds until every
    loop that failed has answered (a loop that never failed changes nothing).

    ``what`` names the process in the log lines (``worker 1234``)."""

    __slots__ = ("_back", "backs", "down", "failures", "log", "quiet", "recovered_at", "since",
                 "what")

    def __init__(self, what: str = "worker", logger: logging.Logger | None = None) -> None:
        self.what = what
        self.log = logger or log
        self.down: set[str] = set()  # the loops failing now
        self.since: float | None = None  # HOST monotonic: the outage's first failure
        self.failures = 0
        self.recovered_at: float | None = None
        self.quiet = False  # this outage relapsed after a logged recovery: log nothing
        self._back = asyncio.Event()  # set when a failed loop answers: the others try now
        #: how many times a failed loop got through: a loop resting on a deadline of its
        #: own (the Metronome's per-queue rest) ends its rest when this moved on
        self.backs = 0

    @property
    def degraded(self) -> bool:
        return bool(self.down)

    def failed(self, source: str, exc: BaseException, retry_ms: int | None = None) -> None:
        """A call of ``source`` (a loop's name) met ``exc`` (a wire error or a refusal
        for now); ``retry_ms``: when that loop tries again."""
        now = time.monotonic()
        self.down.add(source)
        self.failures += 1
        if self.since is not None:
            self.log.debug("%s: %s failed again (%d failures): %s", self.what, source,
                           self.failures, exc)
            return
        self.since = now
        self.failures = 1
        self.quiet = (self.recovered_at is not None
                      and now - self.recovered_at < RELAPSE_S)
        if self.quiet:
            self.log.debug("%s: %s failed just after the recovery: %s", self.what, source,
                           exc)
            return
        retry = f"next try in {retry_ms / 1000:g} s, then " if retry_ms else ""
        self.log.warning("%s degraded: the server does not answer (%s: %s); %sretrying "
                         "with backoff, one line when it answers again", self.what, source,
                         exc, retry)

    def answered(self, source: str) -> None:
        """A call of ``source`` answered: if it had failed, the server is back (the outage's
        INFO, timed from its first failure to now, HOST monotonic)."""
        if source not in self.down:
            return
        self.down.discard(source)
        # the server answered a loop that had failed: the others, asleep on their backoff,
        # try again now instead of at the end of a sleep that may last 30 s
        back, self._back = self._back, asyncio.Event()
        back.set()
        self.backs += 1
        if self.since is None:
            return
        now = time.monotonic()
        if not self.quiet:
            self.log.info("%s recovered: the server answers again after %.1f s (%d failed "
                          "calls)", self.what, now - self.since, self.failures)
            self.recovered_at = now
        self.since = None
        self.failures = 0
        self.quiet = False

    async def pause(self, seconds: float, stop: asyncio.Event) -> None:
        """A failed loop's backoff sleep (HOST monotonic): ``seconds``, or until ``stop``
        is set, or until another loop that had failed answers (the server is back)."""
        if seconds <= 0 or stop.is_set():
            return
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._back.wait())]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*waits, return_exceptions=True)
