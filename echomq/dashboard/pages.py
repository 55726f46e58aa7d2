"""The pages, drawn on the server as HTML (readable with scripts off).

Times: every job time shown is a SERVER-clock ms (schedule, leases, completion, death)
written as UTC, with a ``data-ms`` the script turns into the browser's zone and a live
countdown; registrations are HOST-clock ms (the registry's clock), shown in their zone.
The frame every page is drawn in is ``layout``; the backoff pages are ``backoff_pages``; the
schedule clock and the registrations are ``schedule_pages``. What they draw is read by the
routes (``router``), through ``insight`` and the verbs: these only render.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from echomq.core import codecs, ids, partitions, readings, tally
from echomq.core.tally import Tally
from echomq.dashboard import charts, insight
from echomq.dashboard.access import Access
from echomq.dashboard.backoff_pages import backoff_link, backoff_words, task_policy
from echomq.dashboard.charts import NONE, duration
from echomq.dashboard.failure_pages import FIELDS, failure_section
from echomq.dashboard.layout import (
    PAGE,
    SCORE_MEANING,
    STATE_LABELS,
    crumbs,
    post_form,
    shell,
    when,
)
from echomq.dashboard.web import Request, e, q
from echomq.verbs import flows

__all__ = ["confirm_bulk", "flow_section", "groups_page", "job_page", "overview",
           "queue_page"]


# -- overview ---------------------------------------------------------------------------

def overview(req: Request, views: list[insight.QueueView], access: Access,
             unreadable: dict[str, str] | None = None) -> str:
    now = views[0].now_ms if views else None
    broken = "".join(f"<li><b>{e(name)}</b>: {e(why)}</li>"
                     for name, why in sorted((unreadable or {}).items()))
    broken = (f"<div class='banner down'>Some queues could not be read:<ul>{broken}</ul></div>"
              if broken else "")
    if not views:
        return shell(req, "Queues", "<p class='note'>No queues yet. Enqueue a job and it "
                     "shows up here.</p>", now_ms=now, live=True)
    head = "".join(f"<th class='n'>{_overview_label(s)}</th>" for s in insight.STATES)
    rows = []
    # a partitioned queue (mail#0 ... mail#7) opens with one row for the whole queue, its
    # counts summed; the partitions' own rows (each a complete queue) follow it
    groups = {members[0]: (base, members) for base, members in
              partitions.fold(v.queue for v in views).items() if members != [base]}
    by_name = {v.queue: v for v in views}
    for v in views:
        if v.queue in groups:
            base, members = groups[v.queue]
            total = partitions.sum_counts(by_name[m].counts for m in members if m in by_name)
            bq = q(base)
            cells = "".join(
                f"<td class='n'><a class='count {s}' "
                f"href='{e(req.url(f'/q/{bq}?state={s}'))}'>{total.get(s, 0)}</a></td>"
                for s in insight.STATES)
            rows.append(f"<tr class='partitioned' data-queue='{e(base)}'><td class='qname'>"
                        f"<a href='{e(req.url('/q/' + bq))}'><b>{e(base)}</b></a> "
                        f"<span class='badge'>{len(members)} partitions"
                        f"</span></td>{cells}<td colspan='4'></td></tr>")
        qq = q(v.queue)
        cells = "".join(
            f"<td class='n'><a class='count {s}' data-q='{e(v.queue)}' data-k='{s}' "
            f"href='{e(req.url(f'/q/{qq}?state={s}'))}'>{v.counts[s]}</a></td>"
            for s in insight.STATES)
        done = [c for _, c, _ in v.series]
        failed = [f for _, _, f in v.series]
        paused = (f"<span class='badge paused' data-q='{e(v.queue)}' data-k='paused'>paused"
                  "</span>" if v.paused else
                  f"<span class='badge paused' data-q='{e(v.queue)}' data-k='paused' hidden>"
                  "paused</span>")
        toggle = ""
        if not access.read_only:
            op = "resume" if v.paused else "pause"
            toggle = post_form(req, f"/q/{qq}/{op}", op, "small ghost")
        rows.append(
            f"<tr data-queue='{e(v.queue)}'><td class='qname'><a href='{e(req.url('/q/' + qq))}'>"
            f"{e(v.queue)}</a> {paused}</td>{cells}"
            f"<td>{charts.sparkline(done, 'done', label='completed')}"
            f"{charts.sparkline(failed, 'failed', label='failed')}</td>"
            f"<td class='n' data-q='{e(v.queue)}' data-k='oldest_due_age_ms'>"
            f"{e(duration(v.oldest_due_age_ms))}</td>"
            f"<td class='n' data-q='{e(v.queue)}' data-k='promote_lag_ms'>"
            f"{e(duration(v.promote_lag_ms))}</td>"
            f"<td class='links'><a href='{e(req.url(f'/q/{qq}/clock'))}'>clock</a> "
            f"<a href='{e(req.url(f'/q/{qq}/repeat'))}'>registrations ({v.registrations})</a>"
            + (f" <a href='{e(req.url(f'/q/{qq}/groups'))}'>groups ({v.groups})</a>"
               if v.groups else "")
            + f" {toggle}</td></tr>")
    totals = {k: sum(v.stats.get(k, 0) for v in views)
              for k in ("completed", "failed", "retried", "dead", "cancelled", "expired",
                        "corrupt")}
    for rare in ("corrupt", "expired"):  # rows a claim could not run; missed deadlines
        if not totals[rare]:
            del totals[rare]
    stat = "".join(f"<div class='stat'><span>{'completed (all)' if k == 'completed' else k}"
                   f"</span><b>{n:,}</b></div>" for k, n in totals.items())
    body = (
        f"{broken}<div class='stats'>{stat}</div>"
        "<table class='grid overview'><thead><tr><th>queue</th>"
        f"{head}<th>last hour <span class='legend done'>done</span> "
        "<span class='legend failed'>failed</span></th><th class='n'>oldest due</th>"
        f"<th class='n'>promote lag</th><th></th></tr></thead><tbody>{''.join(rows)}"
        "</tbody></table>"
        "<p class='hint'>Counts refresh live. <b>Oldest due</b>: how long the oldest claimable "
        "job has waited; <b>promote lag</b>: how far past its run-at the earliest scheduled "
        "job still sits (0 when promotion keeps up). <b>Pending</b> counts the flat queue; "
        "a grouped job waits in its group's lane (see <em>groups</em>). "
        "<b>Completed (all)</b> counts every job completed, kept or not (the server's "
        "counters, as <code>echomq stats</code> counts them); <b>Completed (kept)</b> counts "
        "the completed rows retention still keeps.</p>"
    )
    return shell(req, "Queues", body, now_ms=now, live=True)


def _overview_label(state: str) -> str:
    """A state's column head on the overview: the completed column counts kept rows only
    (the stat above it counts every completion), so it says so."""
    return "Completed (kept)" if state == "completed" else STATE_LABELS[state]


# -- a queue's jobs -----------------------------------------------------------------------

def queue_page(req: Request, v: insight.QueueView, page: insight.Page, access: Access,
               members: list[str] | None = None) -> str:
    """One state's jobs of a queue; ``members``: the partitions of a partitioned queue
    (``v`` and ``page`` are then folded: each job names its partition and opens there)."""
    qq = q(v.queue)
    tabs = "".join(
        f"<a class='tab{' on' if s == page.state else ''}' "
        f"href='{e(req.url(f'/q/{qq}?state={s}'))}'>{STATE_LABELS[s]} "
        f"<span class='count' data-q='{e(v.queue)}' data-k='{s}'>{v.counts[s]}</span></a>"
        for s in insight.STATES)
    links = (f"<a href='{e(req.url(f'/q/{qq}/clock'))}'>schedule clock</a> · "
             f"<a href='{e(req.url(f'/q/{qq}/repeat'))}'>registrations "
             f"({v.registrations})</a> · <a href='{e(req.url(f'/q/{qq}/groups'))}'>groups "
             f"({v.groups})</a>")
    if members:  # clock, registrations and groups belong to each partition
        links = (f"{len(members)} partitions: " + " · ".join(
            f"<a href='{e(req.url('/q/' + q(m)))}'>{e(m)}</a>" for m in members))
    search = (f"<form method='get' action='{e(req.url('/q/' + qq))}' class='search-q'>"
              "<input name='id' placeholder='job id' aria-label='job id' size='32'> "
              "<button class='ghost'>find</button></form>")
    st = page.state
    bulk = st == "dead" and not access.read_only and not members  # bulk acts on one queue
    rows = []
    for x in page.entries:
        link = req.url(f"/q/{q(x.get('queue') or v.queue)}/job/{q(x['id'])}")
        score = x["score"]
        shown = (str(score) if st == "pending" else when(score, page.now_ms))
        check = (f"<td><input type='checkbox' name='id' value='{e(x['id'])}' form='bulk' "
                 f"aria-label='choose {e(x['id'])}'></td>" if bulk else "")
        err = x.get("error") or ""
        rows.append(
            f"<tr>{check}<td><a href='{e(link)}'><code>{e(x['id'])}</code></a></td>"
            f"<td>{e(x['task'] or NONE)}</td><td class='args'><code>{e(x['args'])}</code></td>"
            f"<td class='n' title='{e(_tally(x).detail())}'>"
            f"{e(x['attempts'] if x['attempts'] is not None else 0)}</td>"
            f"<td>{shown}</td><td class='err'>{e(err[:160])}</td></tr>")
    nav = ""
    if req.arg("after"):
        nav += f"<a class='ghost btn' href='{e(req.url(f'/q/{qq}?state={st}'))}'>⟵ first page</a> "
    if page.next_cursor:
        nxt = req.url(f"/q/{qq}?" + urlencode({"state": st, "after": page.next_cursor}))
        nav += f"<a class='btn' rel='next' href='{e(nxt)}'>next {PAGE} ⟶</a>"
    head_check = "<th></th>" if bulk else ""
    table = (
        f"<table class='grid jobs'><thead><tr>{head_check}<th>id</th><th>task</th>"
        f"<th>arguments</th><th class='n'>runs</th><th>{SCORE_MEANING[st]}</th>"
        f"<th>last error</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows else f"<p class='note'>No {st} jobs.</p>")
    bulk_form = ""
    if bulk and rows:
        bulk_form = (
            f"<form id='bulk' method='post' action='{e(req.url(f'/q/{qq}/bulk'))}' "
            "class='bulk' data-confirm='Apply to the chosen dead jobs?'>"
            "<button name='op' value='retry'>retry chosen</button> "
            "<button name='op' value='delete' class='danger'>delete chosen</button> "
            "<label><input type='checkbox' name='all' value='1'> all (up to 500)</label>"
            "</form>")
    done = ""
    if req.arg("done"):
        done = f"<p class='ok'>{e(req.arg('op'))}: {e(req.arg('done'))} job(s).</p>"
    paused = "<span class='badge paused'>paused</span>" if v.paused else ""
    body = (
        f"<div class='tabs'>{tabs}</div><div class='bar'>{links} {paused}{search}</div>"
        f"{done}{bulk_form}{table}<div class='pager'>{nav}"
        f"<span class='muted'>{page.total:,} {st} in all</span></div>"
    )
    return shell(req, f"{v.queue}: {st}", body, crumbs(req, v.queue), v.now_ms, live=True)


def _pretty(raw: Any) -> str:
    if raw is None:
        return NONE
    data = raw if isinstance(raw, bytes) else str(raw).encode()
    if codecs.sealed(data):  # coded: opened with $ECHOMQ_KEYS, else only named
        opened = codecs.shown(data)[1]
        if opened is None:
            return "encrypted (set ECHOMQ_KEYS to read it)"
        data = opened
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=True)
    except (ValueError, UnicodeDecodeError):
        return data.decode(errors="replace")


def _tree_html(req: Request, node: Any, here: tuple[str, str]) -> str:
    state = node.state or "?"
    link = req.url(f"/q/{q(node.queue)}/job/{q(node.id)}")
    me = " class='here'" if (node.queue, node.id) == here else ""
    err = f" <span class='err'>{e(node.error[:80])}</span>" if node.error else ""
    kids = "".join(_tree_html(req, c, here) for c in node.children)
    return (f"<li{me}><span class='badge {e(state)}'>{e(state)}</span> "
            f"<a href='{e(link)}'><code>{e(node.id)}</code></a> "
            f"<span class='muted'>{e(node.queue)}</span>{err}"
            + (f"<ul>{kids}</ul>" if kids else "") + "</li>")


def flow_section(req: Request, row: dict[str, Any], tree: Any, queue: str | None = None) -> str:
    """The job's flow, drawn as a tree (the parent it feeds, the job a linked node waits
    for, and what waits below it)."""
    parts = []
    linked = row.get("linked")
    if linked and queue is not None:  # a node whose unique key that job owned
        parts.append(f"<p>Linked to <a href='{e(req.url(f'/q/{q(queue)}/job/{q(str(linked))}'))}'>"
                     f"<code>{e(linked)}</code></a>, the job that owns its unique key: its "
                     f"end counts as this node's.</p>")
    parent = row.get("parent")
    if parent:
        try:
            pq, pid = flows.parse_ref(str(parent))
            parts.append(f"<p>Part of a flow: its parent is <a href='"
                         f"{e(req.url(f'/q/{q(pq)}/job/{q(pid)}'))}'><code>{e(pid)}</code></a>"
                         f" on {e(pq)}.</p>")
        except ValueError:
            pass
    if tree is not None and tree.children:
        parts.append(f"<ul class='tree'>{_tree_html(req, tree, (tree.queue, tree.id))}</ul>")
    return f"<h2>Flow</h2>{''.join(parts)}" if parts else ""


def _tally(row: dict[str, Any]) -> Tally:
    return tally.of_row({k: row.get(k) for k in ("attempts", "failures", "delays",
                                                  "stalled")})


def job_page(req: Request, queue: str, job_id: str, row: dict[str, Any], access: Access,
             tasks: dict[str, Any] | None = None, tree: Any = None,
             holder: str | None = None) -> str:
    """One job's page; ``holder``: the live worker running it (an active job), if known."""
    qq, jj = q(queue), q(job_id)
    state = row.get("state", "?")
    now = row["now_ms"]
    score = row.get("score")
    facts = [("state", f"<span class='badge {e(state)}'>{e(state)}</span>")]
    if row.get("waiting_on"):
        facts.append(("waiting on", f"<span class='why'>{e(row['waiting_on'])}</span>"))
    if state == "scheduled":
        facts.append(("run at", when(score, now)))
    elif state == "active":
        facts.append(("lease until", when(score, now)))
        facts.append(("held by", e(holder) if holder else
                      "<span class='muted'>no live worker reports it (a lapsed lease is "
                      "reaped back to pending)</span>"))
    elif state in ("completed", "dead", "cancelled", "expired", "waiting-children") \
            and score is not None:
        facts.append((SCORE_MEANING[state], when(score, now)))
    # the counts in the one vocabulary (echomq.core.tally), as `echomq job` prints them
    facts.append(("runs", e(_tally(row).text())))
    for k in ("priority", "group", "unique"):
        if row.get(k) is not None:
            facts.append((k, e(row[k])))
    with contextlib.suppress(ValueError):  # a hand-written id has no mint time
        facts.append(("minted", when(ids.timestamp_ms(job_id), now)))
    deadline = readings.whole(row.get("expires"))
    if deadline is not None:
        facts.append(("deadline", when(readings.score_ms(deadline), now)))
    for k in ("completed_at", "died_at", "cancelled_at", "expired_at"):
        ms = readings.whole(row.get(k))
        if ms is not None and ms != score:  # the set's score, shown above
            facts.append((k.replace("_", " "), when(readings.score_ms(ms), now)))
    if row.get("progress") is not None:
        facts.append(("progress", f"<code>{e(row['progress'])}</code>"))
    known = {"state", "attempts", "failures", "delays", "stalled", "priority", "group", "unique",
             "payload", "error", "progress", "result", "score", "now_ms", "completed_at",
             "died_at", "cancelled_at", "expired_at", "expires", "has_children", "parent",
             "waiting_on", "steps", "task"} | FIELDS
    for k in sorted(set(row) - known):
        facts.append((k, explained(k, row[k])))
    table = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in facts)
    task, _ = insight.preview(row.get("payload"))
    task = task or row.get("task")  # a row deleted at the ack: the task kept beside its result
    actions = []
    if not access.read_only:
        if state == "dead":
            actions.append(post_form(req, f"/q/{qq}/job/{jj}/retry", "retry"))
        if state == "scheduled":
            actions.append(post_form(req, f"/q/{qq}/job/{jj}/run", "run now"))
        if state in ("pending", "scheduled", "active", "waiting-children", "waiting"):
            actions.append(post_form(req, f"/q/{qq}/job/{jj}/cancel", "cancel", "warn",
                                 "Cancel this job?"))
        if state not in ("active", "waiting-children"):
            actions.append(post_form(req, f"/q/{qq}/job/{jj}/delete", "delete", "danger",
                                 "Delete this job for good?"))
    policy_note = ""
    if task and tasks and task in tasks:
        policy, attempts = task_policy(tasks[task])
        c = charts.curve(policy, attempts)
        policy_note = (
            f"<p class='hint'>Task <b>{e(task)}</b> runs up to {attempts} times and "
            f"{e(backoff_words(policy))}: dead-lettered {e(duration(c.total_ms))} after its "
            f"first failure at most (<a href='{e(req.url(backoff_link(task, tasks[task])))}'>"
            "curve</a>).</p>")
    body = (
        f"<div class='actions'>{''.join(actions)}</div>{policy_note}"
        f"<div class='cols'><div><h2>Facts</h2><table class='facts'>{table}</table></div>"
        f"<div><h2>Payload{' · ' + e(task) if task else ''}</h2>"
        f"<pre class='payload'>{e(_pretty(row.get('payload')))}</pre>"
        + failure_section(row, now)  # the last error, its traceback, the history
        + (f"<h2>Result</h2><pre>{e(_pretty(row['result']))}</pre>"
           if row.get("result") is not None else "")
        + "</div></div>" + steps_section(row) + flow_section(req, row, tree, queue)
    )
    return shell(req, f"Job {job_id}", body, crumbs(req, queue, job_id), now)


def steps_section(row: dict[str, Any]) -> str:
    """A durable job's steps (``insight.job``'s ``steps``), in order: name, state, when."""
    steps = row.get("steps") or []
    if not steps:
        return ""
    now = row["now_ms"]
    body = "".join(
        f"<tr><td class='n'>{i}</td><td>{e(s['name'])}</td>"
        f"<td><span class='badge {e(s['state'])}'>{e(s['state'])}</span></td>"
        f"<td>{when(s['at_ms'], now) if s['at_ms'] is not None else NONE}</td></tr>"
        for i, s in enumerate(steps, 1))
    return ("<h2>Steps</h2><table class='steps'><tr><th class='n'>#</th><th>step</th>"
            f"<th>state</th><th>at</th></tr>{body}</table>")


#: a row field the page names in words: its meaning, given the stored value
_FIELD_WORDS: dict[str, Callable[[Any], str | None]] = {
    "notify": lambda v: (f"the end token is kept {duration(readings.whole(v) or 0)} after "
                         "the job ends (what <code>app.result</code> waiters wake on)"),
    "flow": lambda v: ("admitted in a flow (a chain, group or flow): its end is carried to "
                       "the step or parent waiting on it" if v == "1" else None),
    "unique_for": lambda v: f"its unique key is held {duration(readings.whole(v) or 0)}",
}


def explained(field: str, value: Any) -> str:
    """A row field the page has no place for: its value, and its meaning in words when
    known (``notify 600000`` is how long the end token is kept, not a count)."""
    words = _FIELD_WORDS.get(field)
    said = words(value) if words is not None else None
    return f"<code>{e(value)}</code>" + (f" <span class='hint'>{said}</span>" if said else "")


# -- groups -------------------------------------------------------------------------------

def groups_page(req: Request, queue: str, gp: insight.GroupPage, access: Access) -> str:
    rows = []
    for name, g in gp.groups.items():
        rate = (f"{g.rate_max} per {duration(g.rate_per_ms or 0)}" if g.rate_max else NONE)
        op = "resume" if g.paused else "pause"
        act = "" if access.read_only else post_form(
            req, f"/q/{q(queue)}/groups/{q(name)}/{op}", op, "small ghost")
        badge = "<span class='badge paused'>paused</span>" if g.paused else ""
        rows.append(
            f"<tr data-group='{e(name)}'><td><b>{e(name)}</b> {badge}</td>"
            f"<td class='n'>{g.waiting}</td><td class='n'>{g.active}</td>"
            f"<td class='n'>{e(g.limit if g.limit is not None else NONE)}</td>"
            f"<td>{e(rate)}</td><td class='n'>{g.weight}</td><td>{act}</td></tr>")
    nav = ""
    if gp.next_cursor:
        nxt = req.url(f"/q/{q(queue)}/groups?" + urlencode({"cursor": gp.next_cursor}))
        nav = (f"<div class='pager'><a class='btn' rel='next' href='{e(nxt)}'>more groups ⟶"
               "</a></div>")
    table = (
        "<table class='grid'><thead><tr><th>group</th><th class='n'>waiting</th>"
        "<th class='n'>active</th><th class='n'>limit</th><th>rate</th>"
        "<th class='n' title='turns in the ring per round (echomq group weight)'>weight</th>"
        "<th></th>"
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>{nav}"
        if rows else "<p class='note'>No groups on this queue.</p>")
    return shell(req, f"{queue}: groups", table, crumbs(req, queue, "groups"))


# -- bulk confirmation ---------------------------------------------------------------------

def confirm_bulk(req: Request, queue: str, op: str, chosen: list[str]) -> str:
    hidden = "".join(f"<input type='hidden' name='id' value='{e(i)}'>" for i in chosen)
    items = "".join(f"<li><code>{e(i)}</code></li>" for i in chosen[:50])
    more = f"<li>… and {len(chosen) - 50} more</li>" if len(chosen) > 50 else ""
    body = (
        f"<p>{e(op.capitalize())} these {len(chosen)} dead job(s)?</p><ul class='ids'>{items}"
        f"{more}</ul><form method='post' action='{e(req.url(f'/q/{q(queue)}/bulk'))}'>"
        f"{hidden}<input type='hidden' name='op' value='{e(op)}'>"
        "<input type='hidden' name='confirm' value='1'>"
        f"<button class='{'danger' if op == 'delete' else ''}'>yes, {e(op)}</button> "
        f"<a href='{e(req.url(f'/q/{q(queue)}?state=dead'))}'>no, go back</a></form>"
    )
    return shell(req, "Confirm", body, crumbs(req, queue, "confirm"))
