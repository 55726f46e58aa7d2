"""``JobLog``: the worker's one INFO line per finished job (as rq and arq print)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from echomq.runtime.events import Event

log = logging.getLogger("echomq.worker")


class JobLog:
    """An ``on_event`` observer that logs one INFO line per finished job: its id, task,
    outcome and run time (HOST monotonic clock, from its start to its outcome), then hands
    the event to ``forward``. A failure is logged once, by the settlement that records it
    (a WARNING for a retry, an ERROR for a death, naming the task and the run time), so
    this logs nothing for those kinds: one failure is one line."""

    QUIET = frozenset({"started", "degraded", "recovered"})
    #: kinds the settlement logs itself (a timeout's retry or death follows its timed_out)
    SETTLED_LOGS = frozenset({"retrying", "dead", "lost", "settled", "timed_out",
                              "handed_back"})

    def __init__(self, forward: Callable[[Event], None] | None = None) -> None:
        self.forward = forward
        self.running: dict[str, tuple[str, float]] = {}

    def __call__(self, ev: Event) -> None:
        if ev.job_id is not None:
            if ev.kind == "started":
                self.running[ev.job_id] = (ev.info.get("task") or "?", time.monotonic())
            elif ev.kind == "timed_out":
                pass  # its retry or death ends the attempt, and logs it
            elif ev.kind in self.SETTLED_LOGS:
                self.running.pop(ev.job_id, None)
            elif ev.kind not in self.QUIET:
                task, t0 = self.running.pop(ev.job_id, ("?", time.monotonic()))
                log.info("job %s %s: %s (%.1f ms)", ev.job_id, task, ev.kind,
                         (time.monotonic() - t0) * 1000)
        if self.forward is not None:
            self.forward(ev)
