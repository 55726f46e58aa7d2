"""A job's counts in one vocabulary: runs, failures, delays (and stalls).

- **runs**: how many times a worker started the job (the row's ``attempts``, the claim's
  fencing token; a ``RateLimited`` hand-back gives its run back).
- **failures**: runs that ended in an error (an exception, a timeout, ``Fail``, ``Retry``).
- **delays**: runs that ended in a ``Delay`` (sent back to the schedule, no failure).
- **stalled**: runs whose worker vanished, returned by the reaper after their lease.

The retry budget (``max_attempts``) counts every run that was not a delay: a delay never
spends it. The log lines, ``echomq job``, ``app.job(id)``, the dashboard and the events
all use these words for these numbers. Pure: no I/O, no clock.

>>> Tally(runs=4, failures=2, delays=2).text()
'4 runs (2 failures, 2 delays)'
>>> Tally(runs=1, failures=1).text()
'1 run (1 failure)'
"""

from __future__ import annotations

from typing import Any, NamedTuple

from echomq.core import readings


class Tally(NamedTuple):
    """A job's counts (see the module doc)."""

    runs: int = 0
    failures: int = 0
    delays: int = 0
    stalled: int = 0

    @property
    def spent(self) -> int:
        """The runs that count against ``max_attempts`` (every run but the delays)."""
        return max(0, self.runs - self.delays)

    def text(self) -> str:
        """``"4 runs (2 failures, 2 delays)"``: the words every surface prints."""
        return f"{_n(self.runs, 'run')} {self.detail()}"

    def detail(self) -> str:
        """``"(2 failures, 2 delays)"``: the failures, and the delays and stalls when there
        are any."""
        parts = [_n(self.failures, "failure")]
        if self.delays:
            parts.append(_n(self.delays, "delay"))
        if self.stalled:
            parts.append(f"{self.stalled} stalled")
        return f"({', '.join(parts)})"

    def info(self) -> dict[str, int]:
        """The counts as event info (``runs``, ``failures``, ``delays``, ``stalled``)."""
        return self._asdict()


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def of_row(row: dict[str, Any]) -> Tally:
    """The tally of a job row (a missing field, or one another client garbled, counts 0:
    ``core.readings``)."""
    def num(name: str) -> int:
        return readings.whole(row.get(name), 0) or 0

    return Tally(num("attempts"), num("failures"), num("delays"), num("stalled"))
