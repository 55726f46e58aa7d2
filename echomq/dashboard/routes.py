"""The dashboard's core: routes and the access gate. Pages are drawn in ``pages``; what a
POST does is ``actions``.

``Dashboard.handle(request) -> response`` is the whole web app; it reads and acts only
through verbs (``insight``, ``jobs``, ``dead``, ``repeat``, ``metrics``), each a bounded
number of server commands, on one sync ``Connector`` (thread safe: it pools).

Routes (all under the mount root):

| path | what |
|---|---|
| ``/`` | every queue: counts per state, sparklines, oldest due age, promote lag, paused |
| ``/q/<q>?state=S&after=C`` | a page of one state's jobs (cursor paging), search by id |
| ``/q/<q>/job/<id>`` | one job: payload, attempts, failures, error, result, actions |
| ``/q/<q>/clock?at=MS`` | the schedule clock: what a promote at ``at`` would release |
| ``/q/<q>/repeat`` | registrations with their next 5 runs, pause/resume/cancel |
| ``/q/<q>/groups`` | groups: waiting, active, limit, rate, paused; pause/resume |
| ``/tasks?q=NAME`` | each task's options, runs, failure rate, p50/p95 over an hour and a day |
| ``/tasks/<q>/<task>`` | one task: its options and its hour and day plotted |
| ``/workers``, ``/busy`` | live workers (quiet/stop buttons); every job running now |
| ``/backoff?...`` | the backoff curve of a policy, cumulative time to dead-letter |
| ``/events`` | Server-Sent Events: counts per queue, throttled to one a second |
| ``/metrics`` | Prometheus text format |
| ``/api/queues``, ``/api/q/<q>``, ``/api/q/<q>/release?at=MS`` | JSON |
| ``/api/workers``, ``/api/tasks?q=``, ``/api/q/<q>/throughput?minutes=N`` | JSON |

Every POST is an action: it needs a same-origin ``Origin``/``Referer`` and is refused when
the dashboard is read-only.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any
from urllib.parse import unquote, urlencode

from echomq.connectors.connector import Connector
from echomq.core import errors, keyspace, partitions
from echomq.dashboard import (
    actions,
    backoff_pages,
    insight,
    layout,
    pages,
    prometheus,
    task_pages,
    worker_pages,
)
from echomq.dashboard.access import COOKIE, SECURITY_HEADERS, Access
from echomq.dashboard.web import Request, Response, html_response, json_response, q, redirect
from echomq.verbs import discovery, flows, registry, repeat, taskmetrics, workers

SCAN_BUDGET = 20_000  # keys looked at when no queue registry answers
MAX_QUEUES = 500  # queues shown (and read per overview) at most
EVENT_EVERY_S = 1.0  # SSE throttle: at most one update a second per client
EVENT_STREAM_S = 300.0  # a stream ends after this; EventSource reconnects by itself
FLOW_DEPTH, FLOW_WIDTH = 4, 25  # a job page draws at most this much of its flow


def queues_to_show(conn: Connector) -> list[str]:
    """Queue names: the registry (``registry.names``: one ``SMEMBERS``, empty queues
    included), or, while it is empty (queues written only through the low-level verbs), a
    bounded scan for the queues' sorted sets (``discovery.queues``, ``SCAN_BUDGET`` keys
    per node)."""
    names = registry.names(conn)
    if not names:
        names = discovery.queues(conn, SCAN_BUDGET)
    return sorted(names)[:MAX_QUEUES]


def near_ms() -> int:
    """The HOST wall clock in ms: the hint ``insight.overview`` reads its minute ring by
    in one round trip (the SERVER clock still decides which minutes it shows)."""
    return int(time.time() * 1000)


class Forbidden(Exception):
    pass


class Dashboard:
    """The dashboard on one connector. ``queues``: show only these (default: discover)."""

    def __init__(self, conn: Connector, queues: list[str] | None = None,
                 access: Access | None = None, tasks: Mapping[str, Any] | None = None) -> None:
        self.conn = conn
        self.fixed_queues = [keyspace.validate_queue(x) for x in queues] if queues else None
        # an App's tasks (``App.tasks``), when given: their queues are listed even while
        # empty, and each task's retry policy is shown (a Task's queue, max_attempts,
        # backoff and retry_delay_ms)
        self.tasks: dict[str, Any] = dict(tasks or {})
        self.access = access or Access()
        self._lock = threading.Lock()
        self._known: tuple[float, list[str]] = (0.0, [])
        self.closing = threading.Event()  # set on shutdown: open event streams end
        self.unreadable: dict[str, str] = {}  # queues the last overview could not read
        self._live_lock = threading.Lock()
        self._live_cache: tuple[float, str, str] = (-1e9, "", "")

    # -- data -----------------------------------------------------------------------------

    def queues(self) -> list[str]:
        if self.fixed_queues:
            return self.fixed_queues
        # a partitioned task's queue is its partitions (mail#0 ... mail#7), never ``mail``
        declared = sorted({x for t in self.tasks.values()
                           for x in getattr(t, "queues", None) or [t.queue]})
        with self._lock:  # a few seconds of cache: discovery is the one costly read
            at, known = self._known
            if time.monotonic() - at < 5.0:
                return known
        # the app's own queues first (always shown), then the registry's
        found = declared + [x for x in queues_to_show(self.conn) if x not in declared]
        found = found[:MAX_QUEUES]
        with self._lock:
            self._known = (time.monotonic(), found)
        return found

    def members(self, queue: str) -> list[str] | None:
        """The partitions of ``queue`` when it is a partitioned queue among those shown
        (``mail`` -> ``[mail#0, ...]``), else ``None`` (a plain queue or a partition)."""
        got = partitions.fold(self.queues()).get(queue)
        return got if got and got != [queue] else None

    def folded_page(self, queue: str, members: list[str], state: str,
                    after: str | None) -> tuple[insight.QueueView, insight.Page]:
        """A partitioned queue's view and one page of its jobs: each partition's own
        bounded page after its cursor (``insight.page``), merged (``insight.merge_pages``);
        one overview per partition. At most ``len(members)`` pages read, never a full set."""
        cursors = insight.folded_cursors(after, members)
        got = {m: insight.page(self.conn, m, state, c or None, layout.PAGE)
               for m, c in zip(members, cursors, strict=True) if c is not None}
        page = insight.merge_pages(state, layout.PAGE, members, cursors, got)
        view = insight.fold_views(queue, [insight.overview(self.conn, m, near_ms())
                                          for m in members])
        return view, dataclasses.replace(page, total=view.counts.get(state, 0),
                                         now_ms=view.now_ms)

    def views(self) -> list[insight.QueueView]:
        """An overview of every queue shown; a queue whose keys cannot be read (a key of
        the wrong type written by hand) is left out and named in ``unreadable``, so one
        broken queue never takes the page down."""
        out, broken = [], {}
        for x in self.queues():
            try:
                out.append(insight.overview(self.conn, x, near_ms()))
            except errors.ServerError as exc:
                broken[x] = str(exc)
        self.unreadable = broken
        return out

    # -- the gate -------------------------------------------------------------------------

    def handle(self, req: Request) -> Response:
        """Answer one request (security headers on every answer)."""
        resp = self._gate(req)
        resp.headers.extend(SECURITY_HEADERS)
        return resp

    def _gate(self, req: Request) -> Response:
        a = self.access
        if not a.host_ok(req.headers.get("host")):
            return html_response(421, layout.message(req, "Unknown host",
                                 "This dashboard does not answer to that host name."))
        if req.method == "POST" and not a.origin_ok(req.headers.get("origin"),
                                                    req.headers.get("referer"),
                                                    req.headers.get("host")):
            return html_response(403, layout.message(req, "Forbidden",
                                 "Actions are accepted only from the dashboard's own pages."))
        if req.path == "/favicon.ico":
            return self._static("favicon.svg")
        if req.path.startswith("/static/"):
            return self._static(req.path[len("/static/"):])
        if req.path == "/login":
            return self._login(req)
        if a.token is not None:
            given = req.arg("token")
            if given and req.method == "GET":
                if not a.matches(given):
                    return html_response(401, layout.login(req, "That token is not valid."))
                rest = {k: v for k, v in req.query.items() if k != "token"}
                target = req.url(req.path) + ("?" + urlencode(rest, doseq=True) if rest else "")
                return redirect(target, self._cookie(req))
            if not a.token_ok(req.headers.get("authorization"), req.cookie(COOKIE)):
                if req.path in ("/metrics", "/events") or req.path.startswith("/api/"):
                    return Response(401, b"access token required\n",
                                    [("Content-Type", "text/plain"),
                                     ("WWW-Authenticate", "Bearer")])
                return html_response(401, layout.login(req, ""))
        try:
            if req.method == "POST":
                if a.read_only:
                    return html_response(403, layout.message(
                        req, "Read-only", "This dashboard is read-only: actions are off."))
                return actions.act(self.conn, req)
            if req.method in ("GET", "HEAD"):
                return self._get(req)
            return Response(405, b"", [("Allow", "GET, POST")])
        except errors.WireError as exc:
            return html_response(503, layout.unreachable(req, str(exc)), ("Retry-After", "2"))
        except (ValueError, TypeError) as exc:
            return html_response(400, layout.message(req, "Bad request", str(exc)))
        except errors.EchoMQError as exc:
            return html_response(409, layout.message(req, "Refused", str(exc)))
        except LookupError:
            return html_response(404, layout.message(req, "Not found", "Nothing here."))

    def _cookie(self, req: Request) -> tuple[str, str]:
        assert self.access.token is not None
        return ("Set-Cookie", f"{COOKIE}={self.access.token}; Path={req.root or '/'}; "
                "HttpOnly; SameSite=Strict")

    def _login(self, req: Request) -> Response:
        if req.method == "POST":
            given = req.form().get("token", [""])[0]
            if self.access.token is None or self.access.matches(given):
                extra = [self._cookie(req)] if self.access.token else []
                return redirect(req.url("/"), *extra)
            return html_response(401, layout.login(req, "That token is not valid."))
        return html_response(200, layout.login(req, ""))

    def _static(self, name: str) -> Response:
        kinds = {"dashboard.css": "text/css; charset=utf-8",
                 "dashboard.js": "text/javascript; charset=utf-8",
                 "favicon.svg": "image/svg+xml"}
        if name not in kinds:
            return Response(404, b"not found", [("Content-Type", "text/plain")])
        data = resources.files(__package__).joinpath("static", name).read_bytes()
        return Response(200, data, [("Content-Type", kinds[name])])

    # -- reads ----------------------------------------------------------------------------

    def _get(self, req: Request) -> Response:
        parts = [unquote(p) for p in req.path.split("/") if p]
        if not parts:
            views = self.views()
            return html_response(200, pages.overview(req, views, self.access,
                                                     dict(self.unreadable)))
        head = parts[0]
        if head == "events" and len(parts) == 1:
            return Response(200, self._events(), [("Content-Type", "text/event-stream"),
                                                  ("X-Accel-Buffering", "no")])
        if head == "metrics" and len(parts) == 1:
            body = prometheus.scrape(self.conn, self.queues)
            return Response(200, body.encode(), [("Content-Type", prometheus.CONTENT_TYPE)])
        if head == "backoff" and len(parts) == 1:
            return html_response(200, backoff_pages.backoff_page(req, self.tasks))
        if head == "tasks" and len(parts) == 1:
            search = req.arg("q")
            rows = task_pages.gather(self.conn, self.queues(), self.tasks, search)
            return html_response(200, task_pages.tasks_page(req, rows, search, self.tasks))
        if head == "tasks" and len(parts) == 3:
            queue, name = keyspace.validate_queue(parts[1]), parts[2]
            rows = task_pages.gather(self.conn, [queue], self.tasks, only=(queue, name))
            if not rows:
                raise LookupError(name)
            totals = taskmetrics.totals(self.conn, queue).get(name)
            return html_response(200, task_pages.task_page(req, rows[0], totals))
        if head == "workers" and len(parts) == 1:
            live = workers.live(self.conn, sweep=False)
            return html_response(200, worker_pages.workers_page(req, live, self.access))
        if head == "busy" and len(parts) == 1:
            return html_response(200, worker_pages.busy_page(
                req, workers.live(self.conn, sweep=False)))
        if head == "find" and len(parts) == 1:
            return self._find(req, self.queues())
        if head == "api":
            return self._api(req, parts[1:])
        if head == "q" and len(parts) >= 2:
            queue = keyspace.validate_queue(parts[1])
            rest = parts[2:]
            if not rest:
                members = self.members(queue)
                if req.arg("id"):
                    return self._find(req, members or [queue])
                state = req.arg("state", "pending")
                after = req.arg("after") or None
                if members is not None:
                    view, page = self.folded_page(queue, members, state, after)
                    return html_response(200, pages.queue_page(req, view, page, self.access,
                                                                members))
                page = insight.page(self.conn, queue, state, after, layout.PAGE)
                view = insight.overview(self.conn, queue, near_ms())
                return html_response(200, pages.queue_page(req, view, page, self.access))
            if rest[0] == "job" and len(rest) == 2:
                members = self.members(queue)
                if members is not None:  # a partitioned queue: the job's own partition
                    where = registry.locate(self.conn, rest[1], members)
                    if where is None:
                        raise LookupError(rest[1])
                    return redirect(req.url(f"/q/{q(where)}/job/{q(rest[1])}"))
                row = insight.job(self.conn, queue, rest[1])
                if row is None:
                    raise LookupError(rest[1])
                tree = None
                if row["has_children"]:
                    tree = flows.tree(self.conn, queue, rest[1], FLOW_DEPTH, FLOW_WIDTH)
                return html_response(200, pages.job_page(req, queue, rest[1], row, self.access,
                                                         self.tasks, tree))
            if rest == ["clock"]:
                tl = insight.timeline(self.conn, queue, 500)
                at = int(req.arg("at") or tl.now_ms)
                rel = insight.release_at(self.conn, queue, at, 20)
                return html_response(200, pages.clock_page(req, queue, tl, rel))
            if rest == ["repeat"]:
                regs = repeat.records(self.conn, queue)[:layout.PAGE]
                return html_response(200, pages.repeat_page(req, queue, regs, self.access))
            if rest == ["groups"]:
                gp = insight.group_page(self.conn, queue, req.arg("cursor", "0"), layout.PAGE)
                return html_response(200, pages.groups_page(req, queue, gp, self.access))
        raise LookupError(req.path)

    def _find(self, req: Request, queues: list[str]) -> Response:
        job_id = req.arg("id").strip()
        where = registry.locate(self.conn, job_id, queues) if job_id else None
        if where is not None:
            return redirect(req.url(f"/q/{q(where)}/job/{q(job_id)}"))
        return html_response(404, layout.message(
            req, "Not found", f"No job {job_id!r} in {', '.join(queues) or 'any queue'}."))

    def _api(self, req: Request, parts: list[str]) -> Response:
        if parts == ["workers"]:
            return json_response(json.dumps(
                [w.as_dict() for w in workers.live(self.conn, sweep=False)]))
        if parts == ["tasks"]:
            rows = task_pages.gather(self.conn, self.queues(), self.tasks, req.arg("q"))
            return json_response(json.dumps([_task_json(r) for r in rows]))
        if len(parts) == 3 and parts[0] == "q" and parts[2] == "throughput":
            queue = keyspace.validate_queue(parts[1])
            got = insight.throughput(self.conn, queue, int(req.arg("minutes") or 1440))
            return json_response(json.dumps({"queue": queue, "minutes": [
                {"minute": m, "completed": c, "failed": f} for m, c, f in got]}))
        if parts == ["queues"]:
            return json_response(json.dumps(_queues_json(self.views())))
        if len(parts) == 2 and parts[0] == "q":
            name = keyspace.validate_queue(parts[1])
            members = self.members(name)
            v = (insight.fold_views(name, [insight.overview(self.conn, m, near_ms())
                                           for m in members])
                 if members is not None else insight.overview(self.conn, name, near_ms()))
            return json_response(json.dumps(_view_json(v)))
        if len(parts) == 3 and parts[0] == "q" and parts[2] == "release":
            queue = keyspace.validate_queue(parts[1])
            rel = insight.release_at(self.conn, queue, int(req.arg("at")), 20)
            return json_response(json.dumps({
                "at_ms": rel.at_ms, "count": rel.count, "scheduled": rel.scheduled,
                "now_ms": rel.now_ms, "first": [{"id": i, "run_at_ms": s} for i, s in rel.first],
            }))
        raise LookupError("/api/" + "/".join(parts))

    def _live(self) -> tuple[str, str]:
        """The event every open stream sends now: read at most once a second whatever the
        number of browsers watching (one overview per queue)."""
        with self._live_lock:
            at, kind, body = self._live_cache
            if time.monotonic() - at < EVENT_EVERY_S * 0.9:
                return kind, body
            try:
                body = json.dumps({"queues": {v.queue: _view_json(v) for v in self.views()}},
                                  sort_keys=True)
                kind = "counts"
            except errors.WireError as exc:
                body, kind = json.dumps({"error": str(exc)}), "down"
            self._live_cache = (time.monotonic(), kind, body)
            return kind, body

    def _events(self) -> Iterator[bytes]:
        """Counts per queue once a second while they change (a comment every 15 s keeps
        proxies from closing an idle stream); ``down`` while Valkey is unreachable. The
        stream ends after ``EVENT_STREAM_S``; the browser's EventSource reconnects."""
        yield b"retry: 2000\n\n"
        last, quiet, started = "", 0.0, time.monotonic()
        while time.monotonic() - started < EVENT_STREAM_S and not self.closing.is_set():
            kind, body = self._live()
            if body != last:
                yield f"event: {kind}\ndata: {body}\n\n".encode()
                last, quiet = body, 0.0
            else:
                quiet += EVENT_EVERY_S
                if quiet >= 15:
                    yield b": ping\n\n"
                    quiet = 0.0
            self.closing.wait(EVENT_EVERY_S)


def _queues_json(views: list[insight.QueueView]) -> dict[str, dict[str, Any]]:
    """``{queue: counts}``; a partitioned queue is one entry (``mail``) with its counts
    summed, ``partitions`` (how many) and ``by_partition`` (each partition's counts)."""
    by_name = {v.queue: v for v in views}
    out: dict[str, dict[str, Any]] = {}
    for base, members in partitions.fold(by_name).items():
        if members == [base]:
            out[base] = dict(by_name[base].counts)
            continue
        entry: dict[str, Any] = partitions.sum_counts(by_name[m].counts for m in members)
        entry["partitions"] = len(members)
        entry["by_partition"] = {m: by_name[m].counts for m in members}
        out[base] = entry
    return out


def _view_json(v: insight.QueueView) -> dict[str, Any]:
    return {
        "queue": v.queue, "counts": v.counts, "stats": v.stats, "paused": v.paused,
        "now_ms": v.now_ms, "server_now_ms": v.now_ms, "oldest_due_age_ms": v.oldest_due_age_ms,
        "promote_lag_ms": v.promote_lag_ms, "repeat": v.registrations,
        "completed_per_min": [c for _, c, _ in v.series],
        "failed_per_min": [f for _, _, f in v.series],
    }


def _task_json(r: task_pages.TaskRow) -> dict[str, Any]:
    def summary(s: taskmetrics.Summary) -> dict[str, Any]:
        return {"runs": s.runs, "total": s.total, "failures": s.failures,
                "failure_rate": s.failure_rate, "per_minute": s.per_minute,
                "p50_s": s.p50_s, "p95_s": s.p95_s}

    return {"queue": r.queue, "task": r.task, "options": r.options,
            "hour": summary(r.hour), "day": summary(r.day)}
