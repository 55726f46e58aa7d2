"""The server's weather as one process logs it: one WARNING when an outage starts, one INFO
when it ends.

Every loop of a worker (each consumer's claims and legs, the Metronome, the lease
checkpoints, the registry heartbeat) meets the same outage at about the same time, and
each retries on its own backoff curve. Logged per loop and per retry, a six-second outage
printed dozens of lines. Instead they all report to one ``Weather``: the first failure of
an outage logs a WARNING naming the error and the loop that met it, later failures log at
DEBUG, and the first call that answers afterwards logs one INFO with the outage's length.
A failure soon after a recovery (a pooled connection that broke in the outage fails once
when next used) continues the same outage instead of starting a new one, so it logs
nothing.

Clock: the HOST monotonic clock (how long the outage lasted, the relapse window).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("echomq.worker")

#: a failure within this many seconds of a recovery continues the same outage, silently
RELAPSE_S = 5.0


class Weather:
    """What one process's loops report about the server: ``failed`` and ``answered``.

    ``what`` names the process in the log lines (``worker 1234``)."""

    __slots__ = ("down_since", "failures", "log", "quiet", "recovered_at", "what")

    def __init__(self, what: str = "worker", logger: logging.Logger | None = None) -> None:
        self.what = what
        self.log = logger or log
        self.down_since: float | None = None  # HOST monotonic: the outage's first failure
        self.failures = 0
        self.recovered_at: float | None = None
        self.quiet = False  # this outage relapsed after a logged recovery: log nothing

    @property
    def degraded(self) -> bool:
        return self.down_since is not None

    def failed(self, source: str, exc: BaseException, retry_ms: int | None = None) -> None:
        """A call of ``source`` (a loop's name) met ``exc`` (a wire error or a refusal
        for now); ``retry_ms``: when that loop tries again."""
        now = time.monotonic()
        self.failures += 1
        if self.down_since is not None:
            self.log.debug("%s: %s failed again (%d failures): %s", self.what, source,
                           self.failures, exc)
            return
        self.down_since = now
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

    def answered(self) -> None:
        """A call answered: the end of the outage, if one was under way."""
        if self.down_since is None:
            return
        now = time.monotonic()
        if not self.quiet:
            self.log.info("%s recovered: the server answers again after %.1f s (%d failed "
                          "calls)", self.what, now - self.down_since, self.failures)
            self.recovered_at = now
        self.down_since = None
        self.failures = 0
        self.quiet = False
