"""A job's status as the friendly layer shows it: ``JobInfo`` (``app.job(id)``, ``echomq job``).

Read from the job's row (``jobs.get``), its schedule score and its kept result (with, for a
row deleted at its ack, the task and runs the ack kept beside it: ``kept:<id>``) by one verb
(``read``) that serves both connectors; nothing here does I/O itself. Times are ms: SERVER
ms for what the transitions stamp (``died_at``, ``completed_at``, a run-at priced by
``enqueue_in``), the caller's for an ``enqueue_at``.

What another client may have written is shown, never raised (``echomq.core.readings``): a
count that is no number reads 0, a score past year 9999 (``inf``, ``1e300``) reads as the
last instant a ``datetime`` holds, a row that is not a hash reads as state ``"?"``, and
``JobInfo.notes`` says in words what was off.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from echomq.core import codecs, errors, keyspace, readings
from echomq.core.payload import PLAIN, Format, decode
from echomq.core.steps import Command, Verb, verb
from echomq.core.tally import Tally
from echomq.verbs import durable, jobs, registry, results


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's status. Its counts in the one vocabulary (``echomq.core.tally``): ``runs``
    (how many times a worker started it), ``failures`` (runs that ended in an error),
    ``delays`` (runs that ended in a ``Delay``), ``stalled`` (runs the reaper returned);
    ``attempts`` is ``runs`` by its older name (the row's field). ``run_at_ms``: when a
    scheduled job is due (the schedule score: SERVER ms for ``enqueue_in``/retries/delays,
    caller ms for ``enqueue_at``)."""

    id: str
    queue: str
    state: str
    attempts: int
    error: str | None
    run_at_ms: int | None
    task: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    failures: int = 0
    stalled: int = 0
    delays: int = 0
    died_at_ms: int | None = None
    completed_at_ms: int | None = None
    row: dict[str, Any] = field(default_factory=dict, repr=False)
    priority: int = 0
    group: str | None = None
    progress: Any = None  # the last ``job.progress(value)``, decoded
    result: Any = None  # the kept return value (``keep_result``), decoded; None if none
    cancel_requested: bool = False  # a cancel was requested while it ran
    runs: int = 0  # = attempts: the times a worker started it
    #: what the reader found off in the row or its score (another client's writes), in
    #: words: "attempts 'many' is not a number", a run-at score past year 9999 ...
    notes: tuple[str, ...] = ()

    @property
    def tally(self) -> Tally:
        """The counts as a ``Tally`` (``.text()``: ``"4 runs (2 failures, 2 delays)"``)."""
        return Tally(self.runs, self.failures, self.delays, self.stalled)

    #: the deadline (SERVER ms) a job admitted with ``expires`` must start by; ``None``
    #: once it started (it keeps none) or when it has none
    expires_ms: int | None = None
    expired_at_ms: int | None = None  # when it ended ``expired`` (SERVER ms)
    #: for a job that waits, the control that holds it and when it lets go, in words
    #: ("scheduled for 12:00:03 UTC (in 4.1 s)", "group tenant-7 at its limit (2 of 2
    #: running)", ...: ``jobs.why``); ``None`` for a running or ended job
    waiting_on: str | None = None
    #: the last failure's formatted traceback (bounded to its tail: 8 KiB), ``None`` when
    #: it never failed
    traceback: str | None = None
    #: the last failures (``App(keep_errors=10)``), oldest first: each ``{"at_ms"`` (SERVER
    #: ms), ``"run"``, ``"error"``, ``"traceback"}``
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: a durable job's steps in order, each ``{"name", "state", "at_ms"}`` (SERVER ms;
    #: ``echomq.verbs.durable``); ``[]`` for a job without steps
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run_at(self) -> dt.datetime | None:
        """``run_at_ms`` as an aware UTC ``datetime``."""
        if self.run_at_ms is None:
            return None
        return readings.instant(self.run_at_ms)


_COUNTS = ("attempts", "failures", "stalled", "delays", "priority")
_TIMES = ("died_at", "completed_at")


def info_of(queue: str, job_id: str, row: dict[str, Any], run_at: Any,
            result: bytes | None = None, notes: tuple[str, ...] = (),
            waiting_on: str | None = None, fmt: Format = PLAIN,
            kept: dict[str, str] | None = None) -> JobInfo:
    """``kept``: what the ack that deleted the row left beside its kept result (the
    ``kept:<id>`` hash: task, runs, completed_at; ``read``), standing in for the row."""
    task: str | None = None
    if not row and not notes:  # the row was deleted on ack; the kept result says it completed
        row = kept_row(kept or {})
        task = row.pop("task", None)
    found = [*notes]
    try:
        task, args, kwargs = decode(row.get("payload", b""), fmt)
    except codecs.Sealed as sealed:  # no key here: the task name is in clear, the rest not
        task, args, kwargs = sealed.task, [], {}
        found.append("encrypted: arguments and result (ECHOMQ_KEYS decodes them)")
    except ValueError:
        args, kwargs = [], {}
    for name in _COUNTS:
        found.append(readings.note_field(name, row.get(name)) or "")
    for name in _TIMES:
        found.append(readings.note_field(name, row.get(name)) or "")
    found.append(readings.note_score("run-at", run_at) or "")

    def num(name: str) -> int | None:
        v = row.get(name)
        return readings.whole(v) if v not in (None, "") else None

    def ms(name: str) -> int | None:
        v = readings.whole(row.get(name))
        return readings.score_ms(v) if v is not None else None

    return JobInfo(
        id=job_id, queue=queue, state=row.get("state", "?"), attempts=num("attempts") or 0,
        error=row.get("error"),
        run_at_ms=readings.score_ms(run_at) if run_at is not None else None,
        task=task, args=args, kwargs=kwargs, failures=num("failures") or 0,
        stalled=num("stalled") or 0, delays=num("delays") or 0, died_at_ms=ms("died_at"),
        completed_at_ms=ms("completed_at"), row=row, priority=num("priority") or 0,
        group=row.get("group") or None, progress=_json_or_text(row.get("progress")),
        result=_result(result, fmt), cancel_requested=row.get("cancel") == "1",
        runs=num("attempts") or 0,
        notes=tuple(n for n in found if n),
        expires_ms=ms("expires"), expired_at_ms=ms("expired_at"),
        waiting_on=waiting_on,
        traceback=row.get("traceback") or None, errors=history(row.get("errors")),
    )


def history(text: str | None) -> list[dict[str, Any]]:
    """The row's failure history (``errors``: the retry transition's JSON list), each entry
    with its four keys; what another client wrote that is no such list reads ``[]``."""
    if not text:
        return []
    try:
        got = json.loads(text)
    except ValueError:
        return []
    if not isinstance(got, list):  # Lua's cjson writes no entry as {}
        return []
    return [{"at_ms": readings.whole(e.get("at_ms")), "run": readings.whole(e.get("run")),
             "error": e.get("error"), "traceback": e.get("traceback") or None}
            for e in got if isinstance(e, dict)]


def kept_row(kept: dict[str, str]) -> dict[str, str]:
    """The stand-in row of a job whose row its ack deleted: ``state`` completed, and from
    the ``kept:<id>`` hash the ack left beside its kept result (``{}`` when none: a result
    kept before the ack kept them) ``attempts`` (its runs), ``completed_at`` (SERVER ms)
    and ``task`` (decoded from the payload's spelling, JSON escapes included)."""
    row = {"state": "completed"}
    for field_, name in (("runs", "attempts"), ("completed_at", "completed_at")):
        if kept.get(field_):
            row[name] = kept[field_]
    raw = kept.get("task")
    if raw:
        try:
            got = json.loads(f'"{raw}"')
        except ValueError:
            got = raw
        row["task"] = got if isinstance(got, str) else raw
    return row


def _result(result: bytes | None, fmt: Format) -> Any:
    try:
        return results.value_of(result, fmt)
    except codecs.Sealed:
        return "encrypted"


def _json_or_text(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


@verb
def read(queues: Sequence[str], job_id: str, fmt: Format = PLAIN) -> Verb[JobInfo | None]:
    """``job_id``'s status from the first of ``queues`` whose row or kept result knows it;
    ``None`` when none does. Reads the row, the kept result, the schedule score, and for a
    waiting job what holds it (``jobs.why``); a waiting job found past its deadline is
    ended ``expired`` first (``jobs.expire``: the deadline sweep the workers' beat runs).
    A key at the row's name that is not a hash reads as state ``"?"`` with a note."""
    for queue in queues:
        notes: tuple[str, ...] = ()
        try:
            row = yield from jobs.get.steps(queue, job_id)
        except errors.ServerError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            kind = yield Command(("TYPE", keyspace.job_key(queue, job_id)))
            row, notes = {}, (f"the row is a {readings.text_of(kind)}, not a hash "
                              "(written by another client?)",)
        result = yield from jobs.result.steps(queue, job_id)
        kept = None
        if not row and not notes and result is not None:  # deleted at the ack: what it kept
            got = yield Command(("HGETALL", keyspace.queue_key(queue, f"kept:{job_id}")))
            kept = {readings.text_of(k): readings.text_of(v) for k, v in (got or {}).items()}
        if row or notes or result is not None:
            score = yield Command(("ZSCORE", keyspace.queue_key(queue, "schedule"), job_id))
            waiting_on = None
            hold = None
            if row and row.get("state") in WAITING:
                try:
                    hold = yield from jobs.why.steps(queue, job_id)
                except errors.ServerError:  # a read-only ACL user runs no script
                    hold = None
            if hold is not None:
                if hold.expires_ms is not None and hold.expires_ms <= hold.now_ms:
                    # past its deadline and nothing popped it yet: end it now (the sweep a
                    # beat would run), so the status says what the job's fate is
                    yield from jobs.expire.steps(queue, EXPIRE_BATCH)
                    row = (yield from jobs.get.steps(queue, job_id)) or row
                else:
                    waiting_on = hold.words
            info = info_of(queue, job_id, row or {}, score, result, notes, waiting_on, fmt,
                           kept)
            if row and row.get("steps"):  # a durable job: its journal, in order
                listed = yield from durable.steps.steps(queue, job_id)
                info = replace(info, steps=[s.as_dict() for s in listed])
            return info
    return None


#: how many deadlines a read that finds one passed ends at once (``jobs.expire``'s batch)
EXPIRE_BATCH = 100

#: the states a job waits in (what ``jobs.why`` explains)
WAITING = frozenset({"pending", "scheduled", "waiting-children", "waiting"})


@verb
def lookup(job_id: str, mine: Sequence[str], narrowed: bool = False,
           fmt: Format = PLAIN) -> Verb[JobInfo | None]:
    """``read`` where the job is: on ``mine`` when ``narrowed`` (a caller named the queue),
    else on the queue ``registry.find`` locates among ``mine`` (an app's queues) and every
    registered queue (a job sent with ``options(queue=...)`` or by another app), or on
    ``mine`` when it finds none."""
    where = list(mine)

    def calls() -> Verb[JobInfo | None]:
        found = None if narrowed else (yield from registry.find.steps(job_id, where))
        got: JobInfo | None = yield from read.steps(where if found is None else [found],
                                                    job_id, fmt)
        return got

    return calls()
