"""The dashboard's route table: every path it answers (below the mount root), its method and
what answers it, in one place (``ROUTES``), matched by ``dispatch``.

A pattern is a path of segments: a literal, ``{queue}`` (a queue name, checked: a bad one
is a 400), ``{name}`` (any one segment, URL-decoded) or a last ``*`` (one or more of any).
The first route whose method and literals match answers; a path no route matches is a
404. Reads go through ``insight`` and the verbs here, drawing is the page modules'
(``pages``, ``schedule_pages``, ``task_pages``, ``worker_pages``, ``backoff_pages``); what
a POST does is ``actions``; the JSON is ``api``.

The pages and the JSON (all under the mount root; the POSTs are the actions those pages'
buttons send):

| path | what |
|---|---|
| ``/`` | every queue: counts per state, sparklines, oldest due age, promote lag, paused |
| ``/q/<q>?state=S&after=C`` | a page of one state's jobs (cursor paging), search by id |
| ``/q/<q>/job/<id>`` | one job: payload, attempts, failures, error, result, actions |
| ``/job/<id>`` | the same job page, found on whichever queue holds it (a redirect) |
| ``/q/<q>/clock?at=MS`` | the schedule clock: what a promote at ``at`` would release |
| ``/q/<q>/repeat`` | registrations with their next 5 runs, pause/resume/cancel |
| ``/q/<q>/groups`` | groups: waiting, active, limit, rate, paused; pause/resume |
| ``/tasks?q=NAME`` | each task's options, runs, failure rate, p50/p95 over an hour and a day |
| ``/tasks/<q>/<task>`` | one task: its options and its hour and day plotted |
| ``/workers``, ``/busy`` | live workers (quiet/stop buttons); every job running now |
| ``/batch/<id>``, ``/api/batch/<id>`` | a batch's progress: counts, open/closed, callbacks fired |
| ``/backoff?...`` | the backoff curve of a policy, cumulative time to dead-letter |
| ``/events`` | Server-Sent Events: counts per queue, throttled to one a second |
| ``/metrics`` | Prometheus text format |
| ``/api/queues``, ``/api/q/<q>``, ``/api/q/<q>/release?at=MS`` | JSON |
| ``/api/workers``, ``/api/tasks?q=``, ``/api/q/<q>/throughput?minutes=N`` | JSON |
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from echomq.core import keyspace
from echomq.dashboard import (
    actions,
    api,
    backoff_pages,
    batch_pages,
    insight,
    layout,
    pages,
    prometheus,
    schedule_pages,
    task_pages,
    worker_pages,
)
from echomq.dashboard.insight import tasks as task_rows
from echomq.dashboard.web import Request, Response, html_response, json_response, q, redirect
from echomq.verbs import batches, flows, registry, repeat, taskmetrics, workers

if TYPE_CHECKING:
    from echomq.dashboard.routes import Dashboard

FLOW_DEPTH, FLOW_WIDTH = 4, 25  # a job page draws at most this much of its flow

Params = dict[str, str]
Handler = Callable[["Dashboard", Request, Params], Response]


class Route(NamedTuple):
    """``method`` (``GET`` answers ``HEAD`` too) on ``pattern``, answered by ``handler``."""

    method: str
    pattern: str
    handler: Handler

    def match(self, parts: list[str]) -> Params | None:
        """The path's parameters when ``parts`` (the decoded segments) match the pattern's
        literals, each ``{queue}`` checked (``ValueError``); else ``None``."""
        want = [s for s in self.pattern.split("/") if s]
        rest = want[-1:] == ["*"]
        if rest:
            want = want[:-1]
            if len(parts) <= len(want):
                return None
        elif len(parts) != len(want):
            return None
        if any(w != p for w, p in zip(want, parts, strict=False) if not w.startswith("{")):
            return None
        got = {w[1:-1]: p for w, p in zip(want, parts, strict=False) if w.startswith("{")}
        if "queue" in got:
            got["queue"] = keyspace.validate_queue(got["queue"])
        return got


def dispatch(board: Dashboard, req: Request) -> Response:
    """Answer a request the access gate let through with the first route that matches;
    ``LookupError`` (a 404) when none does."""
    method = "GET" if req.method == "HEAD" else req.method
    parts = [unquote(p) for p in req.path.split("/") if p]
    for route in ROUTES:
        if route.method == method:
            got = route.match(parts)
            if got is not None:
                return route.handler(board, req, got)
    raise LookupError(req.path)


def _not_found(board: Dashboard, req: Request, p: Params) -> Response:
    raise LookupError(req.path)


# -- pages --------------------------------------------------------------------------------

def _overview(board: Dashboard, req: Request, p: Params) -> Response:
    views = board.views()
    return html_response(200, pages.overview(req, views, board.access, dict(board.unreadable)))


def _events(board: Dashboard, req: Request, p: Params) -> Response:
    return Response(200, board.events(), [("Content-Type", "text/event-stream"),
                                          ("X-Accel-Buffering", "no")])


def _metrics(board: Dashboard, req: Request, p: Params) -> Response:
    body = prometheus.scrape(board.conn, board.queues)
    return Response(200, body.encode(), [("Content-Type", prometheus.CONTENT_TYPE)])


def _backoff(board: Dashboard, req: Request, p: Params) -> Response:
    return html_response(200, backoff_pages.backoff_page(req, board.tasks))


def _tasks(board: Dashboard, req: Request, p: Params) -> Response:
    search = req.arg("q")
    rows = task_rows.gather(board.conn, board.queues(), board.tasks, search)
    return html_response(200, task_pages.tasks_page(req, rows, search, board.tasks))


def _task(board: Dashboard, req: Request, p: Params) -> Response:
    queue, name = p["queue"], p["task"]
    rows = task_rows.gather(board.conn, [queue], board.tasks, only=(queue, name))
    if not rows:
        raise LookupError(name)
    totals = taskmetrics.totals(board.conn, queue).get(name)
    return html_response(200, task_pages.task_page(req, rows[0], totals))


def _batch(board: Dashboard, req: Request, p: Params) -> Response:
    info = batches.info(board.conn, p["id"])
    if info is None:
        raise LookupError(p["id"])
    fired = batches.fired(board.conn, p["id"])
    return html_response(200, batch_pages.batch_page(req, p["id"], info, fired))


def _batch_api(board: Dashboard, req: Request, p: Params) -> Response:
    info = batches.info(board.conn, p["id"])
    if info is None:
        raise LookupError(p["id"])
    return json_response(json.dumps({"id": p["id"], **info.as_dict(),
                                     "fired": batches.fired(board.conn, p["id"])}))


def _workers(board: Dashboard, req: Request, p: Params) -> Response:
    live = workers.live(board.conn, sweep=False)
    return html_response(200, worker_pages.workers_page(req, live, board.access))


def _busy(board: Dashboard, req: Request, p: Params) -> Response:
    return html_response(200, worker_pages.busy_page(req, workers.live(board.conn, sweep=False)))


def _find(board: Dashboard, req: Request, p: Params) -> Response:
    return find(board, req, board.queues())


def find(board: Dashboard, req: Request, queues: list[str]) -> Response:
    """The job ``?id=`` names, looked up on ``queues``: a redirect to its page, or a 404."""
    job_id = req.arg("id").strip()
    where = registry.locate(board.conn, job_id, queues) if job_id else None
    if where is not None:
        return redirect(req.url(f"/q/{q(where)}/job/{q(job_id)}"))
    return html_response(404, layout.message(
        req, "Not found", f"No job {job_id!r} in {', '.join(queues) or 'any queue'}."))


def _job_anywhere(board: Dashboard, req: Request, p: Params) -> Response:
    """``/job/<id>``: the job's page on whichever queue holds it (the queues shown, then
    every registered one: ``registry.find``), or a 404 naming where it looked."""
    job_id = p["name"]
    where = registry.find(board.conn, job_id, board.queues())
    if where is not None:
        return redirect(req.url(f"/q/{q(where)}/job/{q(job_id)}"))
    return html_response(404, layout.message(
        req, "Not found", f"No job {job_id!r} on any queue (never queued, or ended and no "
        "longer kept)."))


def _queue(board: Dashboard, req: Request, p: Params) -> Response:
    queue = p["queue"]
    members = board.members(queue)
    if req.arg("id"):
        return find(board, req, members or [queue])
    state = req.arg("state", "pending")
    after = req.arg("after") or None
    if members is not None:
        view, page = board.folded_page(queue, members, state, after)
        return html_response(200, pages.queue_page(req, view, page, board.access, members))
    page = insight.page(board.conn, queue, state, after, layout.PAGE)
    view = board.overview(queue)
    return html_response(200, pages.queue_page(req, view, page, board.access))


def _job(board: Dashboard, req: Request, p: Params) -> Response:
    queue, job_id = p["queue"], p["id"]
    members = board.members(queue)
    if members is not None:  # a partitioned queue: the job's own partition
        where = registry.locate(board.conn, job_id, members)
        if where is None:
            raise LookupError(job_id)
        return redirect(req.url(f"/q/{q(where)}/job/{q(job_id)}"))
    row = insight.job(board.conn, queue, job_id)
    if row is None:
        raise LookupError(job_id)
    tree = None
    if row["has_children"]:
        tree = flows.tree(board.conn, queue, job_id, FLOW_DEPTH, FLOW_WIDTH)
    return html_response(200, pages.job_page(req, queue, job_id, row, board.access,
                                             board.tasks, tree, holder(board, queue, job_id,
                                                                       row)))


def holder(board: Dashboard, queue: str, job_id: str, row: dict[str, object]) -> str | None:
    """The live worker whose running jobs name an active ``job_id`` (its id, host and
    pid, as ``/workers`` lists it), or ``None``."""
    if row.get("state") != "active":
        return None
    for w in workers.live(board.conn, queue=queue, sweep=False):
        if any(r.id == job_id for r in w.busy):
            return f"{w.id} ({w.app}, pid {w.pid} on {w.host})"
    return None


def _clock(board: Dashboard, req: Request, p: Params) -> Response:
    queue = p["queue"]
    tl = insight.timeline(board.conn, queue, 500)
    at = int(req.arg("at") or tl.now_ms)
    rel = insight.release_at(board.conn, queue, at, 20)
    return html_response(200, schedule_pages.clock_page(req, queue, tl, rel))


def _repeat(board: Dashboard, req: Request, p: Params) -> Response:
    queue = p["queue"]
    regs = repeat.records(board.conn, queue)[:layout.PAGE]
    return html_response(200, schedule_pages.repeat_page(req, queue, regs, board.access))


def _groups(board: Dashboard, req: Request, p: Params) -> Response:
    queue = p["queue"]
    gp = insight.group_page(board.conn, queue, req.arg("cursor", "0"), layout.PAGE)
    return html_response(200, pages.groups_page(req, queue, gp, board.access))


ROUTES: tuple[Route, ...] = (
    Route("GET", "/", _overview),
    Route("GET", "/events", _events),
    Route("GET", "/metrics", _metrics),
    Route("GET", "/backoff", _backoff),
    Route("GET", "/tasks", _tasks),
    Route("GET", "/tasks/{queue}/{task}", _task),
    Route("GET", "/workers", _workers),
    Route("GET", "/batch/{id}", _batch),
    Route("GET", "/api/batch/{id}", _batch_api),
    Route("GET", "/busy", _busy),
    Route("GET", "/find", _find),
    Route("GET", "/job/{name}", _job_anywhere),
    Route("GET", "/api/workers", lambda b, r, p: api.workers(b.conn)),
    Route("GET", "/api/tasks", lambda b, r, p: api.tasks(
        task_rows.gather(b.conn, b.queues(), b.tasks, r.arg("q")))),
    Route("GET", "/api/q/{queue}/throughput", lambda b, r, p: api.throughput(
        b.conn, p["queue"], int(r.arg("minutes") or 1440))),
    Route("GET", "/api/queues", lambda b, r, p: api.queues(b.views())),
    Route("GET", "/api/q/{queue}", lambda b, r, p: api.queue(b.view(p["queue"]))),
    Route("GET", "/api/q/{queue}/release", lambda b, r, p: api.release(
        b.conn, p["queue"], int(r.arg("at")))),
    Route("GET", "/q/{queue}", _queue),
    Route("GET", "/q/{queue}/job/{id}", _job),
    Route("GET", "/q/{queue}/clock", _clock),
    Route("GET", "/q/{queue}/repeat", _repeat),
    Route("GET", "/q/{queue}/groups", _groups),
    Route("GET", "/q/{queue}/*", _not_found),  # a bad queue name is a 400, as above
    Route("POST", "/workers/{id}/{op}", lambda b, r, p: actions.worker(
        b.conn, r, p["id"], p["op"])),
    Route("POST", "/q/{queue}/job/{id}/{op}", lambda b, r, p: actions.job(
        b.conn, r, p["queue"], p["id"], p["op"])),
    # the older form of a dead job's retry: back to the dead list
    Route("POST", "/q/{queue}/dead/{id}/{op}", lambda b, r, p: actions.job(
        b.conn, r, p["queue"], p["id"], p["op"], dead=True)),
    Route("POST", "/q/{queue}/bulk", lambda b, r, p: actions.bulk(
        b.conn, r, p["queue"], r.form())),
    Route("POST", "/q/{queue}/repeat/{name}/{op}", lambda b, r, p: actions.registration(
        b.conn, r, p["queue"], p["name"], p["op"])),
    Route("POST", "/q/{queue}/pause", lambda b, r, p: actions.queue(
        b.conn, r, p["queue"], pause=True)),
    Route("POST", "/q/{queue}/resume", lambda b, r, p: actions.queue(
        b.conn, r, p["queue"], pause=False)),
    Route("POST", "/q/{queue}/groups/{group}/{op}", lambda b, r, p: actions.group(
        b.conn, r, p["queue"], p["group"], p["op"])),
    Route("POST", "/q/{queue}/*", _not_found),
)
