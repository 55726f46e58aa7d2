"""The Workers and Busy pages: the live worker registry (``verbs.workers.live``) as a
person reads it, with quiet/stop buttons (POSTs behind the access gate, ``actions.worker``).

Times: a worker's start, last heartbeat and each running job's start are SERVER ms (the
registry's stamps; a job's start is its worker's estimate of SERVER ms), and the ages
shown are SERVER now (read by ``live`` in the same call) minus them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq.dashboard.access import Access
from echomq.dashboard.charts import duration
from echomq.dashboard.layout import post_form, shell, when
from echomq.dashboard.web import Request, e, q


def workers_page(req: Request, live: Sequence[Any], access: Access) -> str:
    now = live[0].now_ms if live else None
    busy = sum(len(w.busy) for w in live)
    slots = sum(w.slots for w in live)
    stats = (f"<div class='stats'><div class='stat'><span>workers</span><b id='workers-n'>"
             f"{len(live)}</b></div><div class='stat'><span>busy</span><b id='busy-n'>"
             f"{busy} / {slots}</b></div></div>")
    if not live:
        body = stats + ("<p class='note'>No live worker. A worker registers itself when it "
                        "starts (<code>echomq worker module:app</code>) and drops out of this "
                        "list two heartbeats after its last one.</p>")
        return shell(req, "Workers", body)
    rows = []
    for w in live:
        buttons = ""
        if not access.read_only:
            wid = q(w.id)
            buttons = (post_form(req, f"/workers/{wid}/quiet", "quiet", "small ghost",
                             f"Quiet worker {w.id}? It stops claiming; running jobs finish.")
                       + post_form(req, f"/workers/{wid}/stop", "stop", "small danger",
                               f"Stop worker {w.id}? It drains and exits, as on SIGTERM."))
        state = w.state + (f" (asked: {w.requested})" if w.requested else "")
        queues = ", ".join(f"<a href='{e(req.url('/q/' + q(x)))}'>{e(x)}</a>"
                           for x in w.queues)
        rows.append(
            f"<tr data-worker='{e(w.id)}'><td><code>{e(w.id)}</code></td><td>{e(w.host)}</td>"
            f"<td class='n'>{w.pid}</td><td>{e(w.app)}</td><td>{queues}</td>"
            f"<td><span class='badge {e(w.state)}'>{e(state)}</span></td>"
            f"<td class='n busy'>{len(w.busy)} / {w.slots}</td>"
            f"<td class='n'>{e(duration(w.uptime_ms))}</td>"
            f"<td class='n'>{e(duration(w.seen_ago_ms))} ago</td>"
            f"<td>{e(w.version)} · wire {w.wire}</td><td class='links'>{buttons}</td></tr>")
    everyone = ""
    if not access.read_only:
        everyone = ("<div class='bar'>"
                    + post_form(req, "/workers/*/quiet", "quiet all", "ghost",
                            "Quiet every live worker?")
                    + post_form(req, "/workers/*/stop", "stop all", "danger",
                            "Stop every live worker?") + "</div>")
    body = (
        f"{stats}{everyone}<table class='grid workers'><thead><tr><th>id</th><th>host</th>"
        "<th class='n'>pid</th><th>app</th><th>queues</th><th>state</th>"
        "<th class='n'>busy</th><th class='n'>up</th><th class='n'>last seen</th>"
        f"<th>version</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<p class='hint'><b>Busy</b>: jobs running now over the worker's slots (its "
        "concurrency on each queue it was given; a partitioned queue is one pool). "
        "<b>Quiet</b>: the worker stops claiming and "
        "finishes what runs; <b>stop</b>: it drains and exits, as on SIGTERM. Both reach it "
        f"within a heartbeat. <a href='{e(req.url('/busy'))}'>Every running job</a>.</p>")
    return shell(req, "Workers", body, now_ms=now)


def busy_page(req: Request, live: Sequence[Any]) -> str:
    now = live[0].now_ms if live else None
    running = sorted(((w, r) for w in live for r in w.busy), key=lambda wr: wr[1].started_ms)
    if not running:
        return shell(req, "Busy", "<p class='note'>Nothing is running now.</p>", now_ms=now)
    rows = []
    for w, r in running:
        age = max(0, (now or r.started_ms) - r.started_ms)
        job = req.url(f"/q/{q(r.queue)}/job/{q(r.id)}")
        rows.append(
            f"<tr data-job='{e(r.id)}'><td><a href='{e(job)}'><code>{e(r.id)}</code></a></td>"
            f"<td><a href='{e(req.url('/tasks?q=' + q(r.task or '')))}'>{e(r.task or '?')}"
            f"</a></td><td><a href='{e(req.url('/q/' + q(r.queue)))}'>{e(r.queue)}</a></td>"
            f"<td class='n runtime'>{e(duration(age))}</td><td class='n'>{r.attempt}</td>"
            f"<td>{when(r.started_ms)}</td><td>{e(w.host)}:{w.pid}</td></tr>")
    body = (
        f"<p>{len(running)} jobs running on {len(live)} workers.</p>"
        "<table class='grid busy'><thead><tr><th>job</th><th>task</th><th>queue</th>"
        "<th class='n'>running for</th><th class='n'>attempt</th><th>started</th>"
        f"<th>worker</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<p class='hint'>What each live worker reported at its last heartbeat, longest "
        "running first.</p>")
    return shell(req, "Busy", body, now_ms=now)
