"""The Tasks pages: each task's options and how it ran over the last hour and day.

A task is listed when the dashboard's app declares it (``--app``), a worker declared it on
the server (``verbs.declarations``) or a worker counted a run of it (``verbs.taskmetrics``).
Its options come from the app's ``Task`` (queue, timeout, retries and backoff, keep_result,
recurrences, group, rate) or else from its declaration; its runs, failure rate and p50/p95
run time from the per-task minute buckets, over the last hour (per minute) and the last day
(per half hour), drawn with ``charts.task_svg``. The backoff explorer stays in
``backoff_pages``; each task links to its own curve there.

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
from echomq.dashboard.backoff_pages import backoff_link
from echomq.dashboard.charts import NONE, Step, duration
from echomq.dashboard.layout import shell
from echomq.dashboard.web import Request, e, q
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
        runs = [(r.get("cron") or "") + (f" ({r['tz']})" if r.get("tz") else "")
                if r.get("cron") else f"every {duration(r.get('every_ms'))}"
                for r in recurrences if isinstance(r, dict)]
        out["cron"] = ", ".join(runs) or NONE
        if "group" in raw:
            group = raw.pop("group")
            out["group"] = NONE if group is None else str(group)
        rate = raw.pop("rate", None)
        out["rate"] = str(rate) if rate else NONE
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


def _pct(rate: float | None) -> str:
    return NONE if rate is None else f"{rate * 100:.1f}%"


def _secs(s: float | None) -> str:
    return NONE if s is None else duration(s * 1000)


def _summary_cells(s: Summary, cls: str) -> str:
    return (f"<td class='n {cls} runs'>{s.total:,}</td><td class='n {cls}'>"
            f"{s.per_minute:.2f}</td><td class='n {cls} fail'>{_pct(s.failure_rate)}</td>"
            f"<td class='n {cls}'>{e(_secs(s.p50_s))}</td><td class='n {cls}'>"
            f"{e(_secs(s.p95_s))}</td>")


def _link(req: Request, r: TaskRow) -> str:
    return req.url(f"/tasks/{q(r.queue)}/{q(r.task)}")


def tasks_page(req: Request, rows: Sequence[TaskRow], search: str = "",
               app_tasks: Mapping[str, Any] | None = None) -> str:
    form = (f"<form method='get' action='{e(req.url('/tasks'))}' class='bar tasksearch'>"
            f"<input name='q' value='{e(search)}' placeholder='Search tasks by name' "
            "aria-label='task name' size='30'> <button>search</button></form>")
    if not rows:
        what = (f"No task matches <b>{e(search)}</b>." if search else
                "No tasks known yet: a worker declares its app's tasks when it starts and "
                "counts their runs; start the dashboard with <code>--app module:app</code> "
                "to list an app's tasks before any worker ran.")
        return shell(req, "Tasks", form + f"<p class='note'>{what}</p>")
    body = []
    for r in rows:
        opts = "".join(f"<div><span class='note'>{e(k)}</span> <code>{e(v)}</code></div>"
                       for k, v in r.options.items()) or f"<span class='note'>{NONE}</span>"
        curve = ""
        if app_tasks and r.task in app_tasks:
            curve = (f" <a href='{e(req.url(backoff_link(r.task, app_tasks[r.task])))}'>"
                     "backoff curve</a>")
        hour_runs = [s.ok + s.failed for s in r.hour_steps]
        day_runs = [s.ok + s.failed for s in r.day_steps]
        hour_failed = [s.failed for s in r.hour_steps]
        body.append(
            f"<tr data-task='{e(r.task)}' data-queue='{e(r.queue)}'><td><a "
            f"href='{e(_link(req, r))}'><b>{e(r.task)}</b></a>{curve}</td>"
            f"<td><a href='{e(req.url('/q/' + q(r.queue)))}'>{e(r.queue)}</a></td>"
            f"<td class='opts'>{opts}</td>"
            f"<td>{charts.sparkline(hour_runs, 'done', label='runs')}"
            f"{charts.sparkline(hour_failed, 'failed', label='failed')}</td>"
            f"{_summary_cells(r.hour, 'hour')}"
            f"<td>{charts.sparkline(day_runs, 'done', label='runs per half hour')}</td>"
            f"{_summary_cells(r.day, 'day')}</tr>")
    cols = ("<th class='n'>runs</th><th class='n'>/min</th><th class='n'>failed</th>"
            "<th class='n'>p50</th><th class='n'>p95</th>")
    table = (
        "<table class='grid tasks'><thead><tr><th rowspan='2'>task</th><th rowspan='2'>"
        "queue</th><th rowspan='2'>options</th><th colspan='6'>last hour</th>"
        f"<th colspan='6'>last day</th></tr><tr><th></th>{cols}<th></th>{cols}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        "<p class='hint'>Runs by outcome as the workers count them (completed, retried, dead, "
        "cancelled, timed out); <b>failed</b> is the share that retried, died or timed out; "
        "p50/p95: the run time, from the duration histogram. The sparklines are runs per "
        "minute (hour) and per half hour (day).</p>")
    more = (f"<p class='note'>Showing the first {MAX_TASKS}: search to narrow.</p>"
            if len(rows) >= MAX_TASKS else "")
    return shell(req, "Tasks", form + table + more)


def task_page(req: Request, r: TaskRow, totals: Tally | None) -> str:
    opts = "".join(f"<tr><th>{e(k)}</th><td><code>{e(v)}</code></td></tr>"
                   for k, v in r.options.items())
    since = ""
    if totals is not None:
        since = ("<p>Since counting began: " + ", ".join(
            f"<b>{n:,}</b> {o.replace('_', ' ')}" for o, n in totals.runs.items())
            + f"; {totals.count:,} runs timed, {duration(totals.sum_s * 1000)} in all.</p>")
    legend = ("<p class='hint'><span class='legend done'>■ ok</span> "
              "<span class='legend failed'>■ failed</span> "
              "<span class='legend p50'>— p50</span> <span class='legend p95'>-- p95</span> "
              "(right axis)</p>")
    body = (
        f"<div class='crumbs'><a href='{e(req.url('/tasks'))}'>Tasks</a> / "
        f"<a href='{e(req.url('/q/' + q(r.queue)))}'>{e(r.queue)}</a></div>"
        f"<table class='grid narrow opts'><tbody>{opts}</tbody></table>{since}"
        "<div class='charts'>"
        f"<div class='chart' id='chart-hour'><h2>Last hour <span class='note'>"
        f"{r.hour.total:,} runs · {_pct(r.hour.failure_rate)} failed · p50 "
        f"{e(_secs(r.hour.p50_s))} · p95 {e(_secs(r.hour.p95_s))}</span></h2>"
        f"{charts.task_svg(r.hour_steps, 'last hour, per minute')}</div>"
        f"<div class='chart' id='chart-day'><h2>Last day <span class='note'>"
        f"{r.day.total:,} runs · {_pct(r.day.failure_rate)} failed · p50 "
        f"{e(_secs(r.day.p50_s))} · p95 {e(_secs(r.day.p95_s))}</span></h2>"
        f"{charts.task_svg(r.day_steps, 'last day, per half hour')}</div></div>{legend}")
    return shell(req, r.task, body)
