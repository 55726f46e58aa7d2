"""The Tasks pages' read: each task of some queues with its options and how it ran over the
last hour and day (``TaskRow``), for ``task_pages`` to draw.

A task is listed when the dashboard's app declares it (``--app``), a worker declared it on
the server (``verbs.declarations``) or a worker counted a run of it (``verbs.taskmetrics``).
Its options come from the app's ``Task`` (queue, timeout, retries and backoff, keep_result,
recurrences, group, rate) or else from its declaration; its runs, failure rate and p50/p95
run time from the per-task minute buckets, over the last hour (per minute) and the last day
(per half hour).

Reads: per queue one ``HGETALL`` of the totals and one of the declarations, then one
pipelined batch of the task windows (``taskmetrics.history``: 289 small ``HGETALL`` per
task for a day), so the list is bounded by ``MAX_TASKS``. Times: minutes are labelled in
UTC; the windows are picked by the SERVER now.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from echomq.connectors.connector import Connector
from echomq.core import backoff, errors
from echomq.dashboard import charts
from echomq.dashboard.charts import NONE, Step, duration
from echomq.tasks import catalog
from echomq.verbs import declarations, jobs, taskmetrics
from echomq.verbs.taskmetrics import History, Summary, Tally

MAX_TASKS = 200
DAY, HOUR, DAY_STEP = 1440, 60, 30
OK = ("completed", "cancelled")


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One task on one queue: its options (label -> text), the last hour and day summed,
    and their steps for the charts (a minute each for the hour, half an hour for the
    day)."""

    queue: str
    task: str
    options: dict[str, str]
    hour: Summary
    day: Summary
    hour_steps: list[Step]
    day_steps: list[Step]


def options_of(task: Any) -> dict[str, str]:
    """An app ``Task``'s options as a person reads them (what its worker would declare,
    ``tasks.catalog.options``)."""
    raw = catalog.options(task.app, task)
    rate = getattr(task, "rate", None)
    if rate:
        raw["rate"] = rate
    return declared_options(raw)


def declared_options(raw: Mapping[str, Any]) -> dict[str, str]:
    """Declared options (``tasks.catalog.options``: what a worker records on the server)
    as label -> text: queue, timeout, retries and backoff, keep_result, cron, group, rate,
    then any other option as it was written."""
    raw = dict(raw)
    out: dict[str, str] = {}
    try:
        if "queue" in raw:
            parts = int(raw.pop("partitions", 1) or 1)
            out["queue"] = str(raw.pop("queue")) + (f" ({parts} partitions)"
                                                    if parts > 1 else "")
        if "timeout_ms" in raw:
            ms = raw.pop("timeout_ms")
            out["timeout"] = duration(ms) if ms else "none"
        if "max_attempts" in raw:
            attempts = int(raw.pop("max_attempts"))
            back = raw.pop("backoff", None)
            delay = raw.pop("retry_delay_ms", None)
            policy: Any = (_policy_of(back) if isinstance(back, list | tuple) and back else
                           ("fixed", int(delay)) if delay is not None else None)
            text = f"{attempts} attempts"
            if policy is not None:
                text += f", backoff {policy!r} ({_policy_text(policy)})"
                with contextlib.suppress(ValueError, TypeError, IndexError):
                    total = charts.curve(policy, attempts).total_ms
                    text += f", dead-lettered at most {duration(total)} after the first failure"
            out["retries"] = text
        if "keep_result_ms" in raw:
            ms = raw.pop("keep_result_ms")
            out["keep_result"] = duration(ms) if ms else "no"
        recurrences = raw.pop("recurrences", None) or []
        kept = [r for r in recurrences if isinstance(r, dict)]
        crons = [r["cron"] + (f" ({r['tz']})" if r.get("tz") else "")
                 for r in kept if r.get("cron")]
        intervals = [duration(r.get("every_ms")) for r in kept if not r.get("cron")]
        out["cron"] = ", ".join(crons) or NONE
        if intervals:  # an interval is no cron expression: its own line
            out["every"] = ", ".join(intervals)
        for key in ("retry_on", "dont_retry_on"):
            if raw.get(key):
                out[key] = ", ".join(map(str, raw.pop(key)))
        if raw.get("expires_ms"):
            out["expires"] = f"{duration(raw.pop('expires_ms'))} after admission"
        if raw.get("expires_at_ms"):
            at = datetime.fromtimestamp(int(raw.pop("expires_at_ms")) / 1000, UTC)
            out["expires"] = f"at {at.isoformat(timespec='seconds')}"
        if "group" in raw:
            group = raw.pop("group")
            out["group"] = NONE if group is None else str(group)
        rate = raw.pop("rate", None)
        out["rate"] = (f"{rate[0]} per {duration(rate[1])}" if isinstance(rate, list | tuple)
                       and len(rate) == 2 else str(rate) if rate else NONE)
    except (TypeError, ValueError):  # a declaration this version cannot read: shown raw
        pass
    for k, v in raw.items():
        if v is not None:
            out[str(k)] = v if isinstance(v, str) else json.dumps(v)
    return out


def _policy_of(declared: list[Any] | tuple[Any, ...]) -> Any:
    """A declared backoff (JSON: lists throughout) as the policy it was: a list of delays
    stays a list, a named kind is a tuple (and a jitter's inner policy likewise)."""
    if backoff.is_steps(declared):
        return list(declared)
    policy = tuple(declared)
    if policy[0] == "jitter" and isinstance(policy[1], list | tuple):
        policy = ("jitter", _policy_of(policy[1]))
    return policy


def _policy_text(policy: Any) -> str:
    if backoff.is_steps(policy):
        return "list " + ", ".join(duration(ms) for ms in policy) + ", the last repeating"
    if policy[0] == "fixed":
        return f"fixed {duration(policy[1])}"
    if policy[0] == "exponential":
        return f"exponential {duration(policy[1])} up to {duration(policy[2])}"
    if policy[0] == "jitter":
        return f"{_policy_text(policy[1])} with jitter"
    return repr(policy)


def _steps(tallies: Sequence[Tally], first_minute: int, step: int) -> list[Step]:
    out = []
    for i, t in enumerate(tallies):
        end = first_minute + (i + 1) * step
        label = datetime.fromtimestamp(end * 60, UTC).strftime("%H:%M")
        ok = sum(t.runs[o] for o in OK)
        out.append(Step(label, ok, t.failures, taskmetrics.quantile(t.buckets, 0.5),
                        taskmetrics.quantile(t.buckets, 0.95)))
    return out


def row_of(queue: str, task: str, h: History, options: dict[str, str]) -> TaskRow:
    hour = History(task, h.first_minute + len(h.minutes) - HOUR, h.minutes[-HOUR:])
    by_step = h.per(DAY_STEP)
    return TaskRow(
        queue=queue, task=task, options=options,
        hour=taskmetrics.summarize(h.span(HOUR), HOUR),
        day=taskmetrics.summarize(h.span(DAY), DAY),
        hour_steps=_steps(hour.per(1), hour.first_minute, 1),
        day_steps=_steps(by_step, h.first_minute + len(h.minutes) - DAY_STEP * len(by_step),
                         DAY_STEP),
    )


def gather(conn: Connector, queues: Sequence[str], app_tasks: Mapping[str, Any],
           search: str = "", only: tuple[str, str] | None = None) -> list[TaskRow]:
    """The tasks of ``queues`` whose names contain ``search`` (any case), at most
    ``MAX_TASKS``, with their options and last day (``only``: that one queue and task)."""
    needle = search.strip().lower()
    now = jobs.server_now_ms(conn)
    out: list[TaskRow] = []
    for x in queues:
        if only is not None and x != only[0]:
            continue
        names: dict[str, dict[str, str]] = {}
        try:
            for name in taskmetrics.totals(conn, x):
                names[name] = {}
            for name, raw in declarations.declared(conn, x).items():
                names[name] = declared_options(raw)
        except errors.ServerError:  # a key of the wrong type: that queue is left out
            continue
        for name, t in app_tasks.items():
            if x in (getattr(t, "queues", None) or [t.queue]):
                names[name] = options_of(t)
        chosen = sorted(n for n in names if needle in n.lower()
                        and (only is None or n == only[1]))[:MAX_TASKS - len(out)]
        if not chosen:
            continue
        hist = taskmetrics.history(conn, x, chosen, DAY, now_ms=now)
        out += [row_of(x, n, hist[n], names[n]) for n in chosen]
        if len(out) >= MAX_TASKS:
            break
    return out
