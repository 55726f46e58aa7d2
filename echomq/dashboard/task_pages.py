"""The Tasks pages: each task's options and how it ran over the last hour and day.

A task is listed when the dashboard's app declares it (``--app``), a worker declared it on
the server (``verbs.declarations``) or a worker counted a run of it (``verbs.taskmetrics``).
Its options come from the app's ``Task`` (queue, timeout, retries and backoff, keep_result,
recurrences, group, rate) or else from its declaration; its runs, failure rate and p50/p95
run time from the per-task minute buckets, over the last hour (per minute) and the last day
(per half hour), drawn with ``charts.task_svg``. The backoff explorer stays in
``backoff_pages``; each task links to its own curve there.

What is drawn is read by ``insight.tasks`` (``gather``): these only render. Times: minutes
are labelled in UTC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from echomq.dashboard import charts
from echomq.dashboard.backoff_pages import backoff_link
from echomq.dashboard.charts import NONE, duration
from echomq.dashboard.insight.tasks import MAX_TASKS, TaskRow
from echomq.dashboard.layout import shell
from echomq.dashboard.web import Request, e, q
from echomq.verbs.taskmetrics import Summary, Tally


def _pct(rate: float | None) -> str:
    return NONE if rate is None else f"{rate * 100:.1f}%"


def _secs(s: float | None) -> str:
    return NONE if s is None else duration(s * 1000)


def _summary_cells(s: Summary, cls: str, times: bool = True) -> str:
    """Runs, failure rate and (``times``) p50/p95: the list's cells for one window (the
    rate per minute and the charts are on the task's page)."""
    cells = (f"<td class='n {cls} runs'>{s.total:,}</td>"
             f"<td class='n {cls} fail'>{_pct(s.failure_rate)}</td>")
    if times:
        cells += (f"<td class='n {cls}'>{e(_secs(s.p50_s))}</td>"
                  f"<td class='n {cls}'>{e(_secs(s.p95_s))}</td>")
    return cells


def _link(req: Request, r: TaskRow) -> str:
    return req.url(f"/tasks/{q(r.queue)}/{q(r.task)}")


#: what the Tasks list shows of a task's options, in this order (the rest, and each in
#: full, are on the task's own page)
SUMMARY = ("retries", "timeout", "cron", "every", "rate", "group", "expires", "retry_on")


def summary(options: Mapping[str, str], link: str) -> str:
    """A task's options in a line or two for the Tasks list: the attempts (not the whole
    backoff), the timeout, recurrences, rate, group, deadline and which errors retry;
    "N more" links to the task's page, where every option is spelt out."""
    shown = []
    for key in SUMMARY:
        value = options.get(key)
        if value is None or value == NONE or (key == "timeout" and value == "none"):
            continue
        if key == "retries":
            value = value.split(",", 1)[0]  # "25 attempts"; the backoff is on the page
        shown.append(f"<span class='opt'><span class='note'>{e(key)}</span> "
                     f"<code>{e(value)}</code></span>")
    rest = len([k for k, v in options.items() if k not in SUMMARY and k != "queue"
                and v not in (None, NONE)])
    if rest:
        shown.append(f"<a class='note' href='{e(link)}'>{rest} more</a>")
    return " · ".join(shown) or f"<span class='note'>{NONE}</span>"


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
        opts = summary(r.options, _link(req, r))
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
            f"{_summary_cells(r.day, 'day', times=False)}</tr>")
    cols = "<th class='n'>runs</th><th class='n'>failed</th>"
    times = "<th class='n'>p50</th><th class='n'>p95</th>"
    table = (
        "<table class='grid tasks'><thead><tr><th rowspan='2'>task</th><th rowspan='2'>"
        "queue</th><th rowspan='2'>options</th><th colspan='5'>last hour</th>"
        f"<th colspan='3'>last day</th></tr><tr><th></th>{cols}{times}<th></th>{cols}</tr>"
        "</thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        "<p class='hint'>Runs by outcome as the workers count them (completed, retried, dead, "
        "cancelled, timed out); <b>failed</b> is the share that retried, died or timed out; "
        "p50/p95: the run time, from the duration histogram. The sparklines are runs per "
        "minute (hour) and per half hour (day). Each task's page spells out every option "
        "and plots its hour and day.</p>")
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
