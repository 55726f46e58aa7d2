"""Per-task metrics on the server: runs by outcome and a run-time histogram, per task, kept
as running totals and in minute buckets for 24 hours.

Workers count in memory (``echomq.runtime.taskstats``) and ``record`` folds what they
counted into the server, a few ``HINCRBY`` per task in one pipelined batch, about once a
second per queue: never a write per job. Any dashboard or ``/metrics`` scrape then sees the
whole fleet.

Layout (every key under the queue's hash tag, so a cluster keeps it on the queue's slot):

- ``emq:{q}:tm`` (hash): running totals, a field ``<code>:<task>`` per code below;
- ``emq:{q}:tm:<task>:<w>`` (hash): window ``w``, the five minutes from epoch minute
  ``5 w``: a field ``<m>:<code>`` per code, ``m`` (0..4) the minute in the window; it
  expires 24 h after the window ends.

Codes: ``c`` completed, ``r`` retried, ``d`` dead, ``x`` cancelled, ``t`` timed out (one per
run, see ``OUTCOMES``), ``h0`` .. ``h13`` runs per duration bucket (``metrics.BUCKETS_S``,
not cumulative, +Inf last), ``s`` the run time summed in microseconds. Only codes that
moved are written. A five-minute window holds at most 5 x 20 fields, so Valkey keeps it in
its compact listpack encoding (under the default ``hash-max-listpack-entries`` 128); memory
per task-day is measured in BENCHMARKS.md ("per-task metrics").

Clocks: the minute a count lands in is the HOST clock of the worker at its flush
(``at_ms``: the caller reads it; workers a few seconds apart only blur a minute's edge);
reads take the SERVER now (``TIME``) to pick the windows.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from echomq.core import keyspace
from echomq.core.steps import Batch, Command, Verb, pairs, single, text, verb
from echomq.verbs.metrics import BUCKETS_S

#: a run's outcomes, in counter order; each run counts under exactly one (a timed-out
#: run that was the job's last attempt counts as ``dead``)
OUTCOMES: tuple[str, ...] = ("completed", "retried", "dead", "cancelled", "timed_out")
FAILURES: tuple[str, ...] = ("retried", "dead", "timed_out")
OUTCOME_CODES: tuple[str, ...] = ("c", "r", "d", "x", "t")
N_BUCKETS = len(BUCKETS_S) + 1
BUCKET_CODES: tuple[str, ...] = tuple(f"h{i}" for i in range(N_BUCKETS))
SUM_CODE = "s"
#: the codes of a tally's slots: outcomes, buckets, then the summed microseconds
CODES: tuple[str, ...] = (*OUTCOME_CODES, *BUCKET_CODES, SUM_CODE)
WIDTH = len(CODES)
SUM_AT = WIDTH - 1
_SLOT = {c: i for i, c in enumerate(CODES)}

WINDOW_MINUTES = 5
KEEP_MINUTES = 24 * 60
MAX_TASK_BYTES = 200


def totals_key(queue: str) -> str:
    """``emq:{q}:tm``: the queue's running totals per task."""
    return keyspace.queue_key(queue, "tm")


def window_key(queue: str, task: str, window: int) -> str:
    """``emq:{q}:tm:<task>:<window>``: five minutes of one task's counts."""
    return keyspace.queue_key(queue, f"tm:{task}:{window}")


def check_task(task: str) -> str:
    if not isinstance(task, str):
        raise TypeError(f"task name must be a str, not {type(task).__name__}")
    if not task or len(task.encode()) > MAX_TASK_BYTES:
        raise ValueError(f"task name must be 1..{MAX_TASK_BYTES} bytes, got {task!r}")
    return task


def bucket_of(seconds: float) -> int:
    """The index of the duration bucket ``seconds`` falls in (``le``: a bound counts in its
    own bucket); the last index is +Inf."""
    return bisect.bisect_left(BUCKETS_S, seconds)


def empty() -> list[int]:
    """A tally's slots, all zero: ``CODES`` order."""
    return [0] * WIDTH


@verb
def record(queue: str, tallies: Mapping[str, Sequence[int]], at_ms: int) -> Verb[None]:
    """Fold ``tallies`` ({task: slots in ``CODES`` order}) into the queue's totals and into
    the minute of ``at_ms`` (HOST epoch ms, the caller's clock): one pipelined batch of
    ``HINCRBY`` (only the slots that moved) and one ``EXPIREAT`` per task."""
    keyspace.validate_queue(queue)
    if not isinstance(at_ms, int) or at_ms < 0:
        raise ValueError(f"at_ms must be an int >= 0, got {at_ms!r}")
    minute = at_ms // 60_000
    window, m = divmod(minute, WINDOW_MINUTES)
    expire_at = str((window + 1) * WINDOW_MINUTES * 60 + KEEP_MINUTES * 60)
    tkey = totals_key(queue)
    steps: list[Command] = []
    for task, slots in tallies.items():
        check_task(task)
        if len(slots) != WIDTH:
            raise ValueError(f"a tally has {WIDTH} slots, got {len(slots)}")
        wkey = window_key(queue, task, window)
        moved = False
        for code, n in zip(CODES, slots, strict=True):
            if n:
                if not isinstance(n, int) or n < 0:
                    raise ValueError(f"tally counts are ints >= 0, got {n!r}")
                steps.append(Command(("HINCRBY", tkey, f"{code}:{task}", n)))
                steps.append(Command(("HINCRBY", wkey, f"{m}:{code}", n)))
                moved = True
        if moved:
            steps.append(Command(("EXPIREAT", wkey, expire_at)))

    def calls() -> Verb[None]:
        if steps:
            yield Batch(tuple(steps))
        return None

    return calls()


# -- reads ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Tally:
    """One task's counts over some span: runs per outcome, runs per duration bucket (not
    cumulative, +Inf last) and the run time summed (seconds)."""

    runs: dict[str, int]
    buckets: list[int]
    sum_s: float

    @property
    def count(self) -> int:
        """Runs timed (the histogram's count)."""
        return sum(self.buckets)

    @property
    def total(self) -> int:
        return sum(self.runs.values())

    @property
    def failures(self) -> int:
        return sum(self.runs[o] for o in FAILURES)


def tally_of(slots: Sequence[int]) -> Tally:
    """A ``Tally`` from slots in ``CODES`` order."""
    return Tally(runs=dict(zip(OUTCOMES, slots[:len(OUTCOMES)], strict=True)),
                 buckets=list(slots[len(OUTCOMES):SUM_AT]), sum_s=slots[SUM_AT] / 1e6)


def add(into: list[int], slots: Sequence[int]) -> list[int]:
    for i, n in enumerate(slots):
        into[i] += n
    return into


def _int(value: Any) -> int:
    try:
        return int(text(value))
    except ValueError:
        return 0


def _fields(reply: Any) -> dict[str, Any]:
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    return pairs(reply or [])


@verb
def totals(queue: str) -> Verb[dict[str, Tally]]:
    """Every task's running totals on ``queue`` since its first recorded run (one
    ``HGETALL``), by task name."""
    key = totals_key(queue)

    def decode(reply: Any) -> dict[str, Tally]:
        out: dict[str, list[int]] = {}
        for field, value in _fields(reply).items():
            code, sep, task = field.partition(":")
            if not sep or code not in _SLOT:
                continue
            out.setdefault(task, empty())[_SLOT[code]] = _int(value)
        return {t: tally_of(s) for t, s in sorted(out.items())}

    return single(Command(("HGETALL", key)), decode)


@dataclass(frozen=True, slots=True)
class History:
    """Minutes of one task's counts, oldest first: ``minutes[i]`` is epoch minute
    ``first_minute + i`` as slots in ``CODES`` order (all zero where nothing ran)."""

    task: str
    first_minute: int
    minutes: list[list[int]]

    def span(self, last: int) -> Tally:
        """The last ``last`` minutes added up."""
        acc = empty()
        for slots in self.minutes[-last:] if last > 0 else []:
            add(acc, slots)
        return tally_of(acc)

    def per(self, step: int) -> list[Tally]:
        """The minutes added up in groups of ``step``, oldest first; the newest group ends
        with the newest minute (the oldest may be shorter)."""
        out = []
        for end in reversed(range(len(self.minutes), 0, -step)):
            acc = empty()
            for slots in self.minutes[max(0, end - step):end]:
                add(acc, slots)
            out.append(tally_of(acc))
        return out


@verb
def history(queue: str, tasks: Sequence[str], minutes: int = 60,
            now_ms: int | None = None) -> Verb[dict[str, History]]:
    """The last ``minutes`` (1..1440) of each of ``tasks``, minute by minute, ending with
    the minute of ``now_ms`` (SERVER ms; read with ``TIME`` when not given): one
    ``HGETALL`` per five-minute window per task, all in one pipelined batch."""
    keyspace.validate_queue(queue)
    if not isinstance(minutes, int) or not 1 <= minutes <= KEEP_MINUTES:
        raise ValueError(f"minutes must be an int in 1..{KEEP_MINUTES}, got {minutes!r}")
    names = [check_task(t) for t in tasks]

    def calls() -> Verb[dict[str, History]]:
        now = now_ms
        if now is None:
            secs, micros = yield Command(("TIME",))
            now = int(secs) * 1000 + int(micros) // 1000
        last = now // 60_000
        first = last - minutes + 1
        windows = list(range(first // WINDOW_MINUTES, last // WINDOW_MINUTES + 1))
        if not names:
            return {}
        replies = yield Batch(tuple(Command(("HGETALL", window_key(queue, t, w)))
                                    for t in names for w in windows))
        out: dict[str, History] = {}
        for i, task in enumerate(names):
            rows = [empty() for _ in range(minutes)]
            for j, w in enumerate(windows):
                reply = replies[i * len(windows) + j]
                if isinstance(reply, Exception):
                    raise reply
                for field, value in _fields(reply).items():
                    m, _, code = field.partition(":")
                    if code not in _SLOT or not m.isdigit():
                        continue
                    at = w * WINDOW_MINUTES + int(m) - first
                    if 0 <= at < minutes:
                        rows[at][_SLOT[code]] += _int(value)
            out[task] = History(task, first, rows)
        return out

    return calls()


# -- summaries (pure) ----------------------------------------------------------------------

def quantile(buckets: Sequence[int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a duration histogram, interpolated linearly inside its
    bucket as Prometheus' ``histogram_quantile`` does (the +Inf bucket answers its lower
    bound); ``None`` with no runs."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(buckets):
        if n and seen + n >= rank:
            lo = BUCKETS_S[i - 1] if i > 0 else 0.0
            if i >= len(BUCKETS_S):
                return lo
            hi = BUCKETS_S[i]
            return lo + (hi - lo) * max(0.0, rank - seen) / n
        seen += n
    return BUCKETS_S[-1]


@dataclass(frozen=True, slots=True)
class Summary:
    """A task over a span: runs, failures (retried + dead + timed out) and their share of
    the runs, runs per minute, and the run time's p50 / p95 (seconds; ``None`` without
    runs)."""

    minutes: int
    runs: dict[str, int]
    total: int
    failures: int
    failure_rate: float | None
    per_minute: float
    p50_s: float | None
    p95_s: float | None


def summarize(t: Tally, minutes: int) -> Summary:
    """``t`` (a task's tally over ``minutes``) as a ``Summary``; reads no clock."""
    total = t.total
    return Summary(
        minutes=minutes, runs=dict(t.runs), total=total, failures=t.failures,
        failure_rate=t.failures / total if total else None,
        per_minute=total / minutes if minutes else 0.0,
        p50_s=quantile(t.buckets, 0.5), p95_s=quantile(t.buckets, 0.95),
    )
