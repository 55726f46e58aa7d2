"""The dashboard's core: the access gate, and what the routes read through it (the queues
shown, their views, the live event stream). The route table is ``router.ROUTES``; pages are
drawn in the page modules; what a POST does is ``actions``.

``Dashboard.handle(request) -> response`` is the whole web app; it reads and acts only
through verbs (``insight``, ``jobs``, ``dead``, ``repeat``, ``metrics``), each a bounded
number of server commands, on one sync ``Connector`` (thread safe: it pools).

Every POST is an action: it needs a same-origin ``Origin``/``Referer`` and is refused when
the dashboard is read-only. The paths it answers are ``router.ROUTES``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from echomq.connectors.connector import Connector
from echomq.core import errors, keyspace, partitions
from echomq.dashboard import api, insight, layout, router
from echomq.dashboard.access import COOKIE, SECURITY_HEADERS, Access
from echomq.dashboard.web import Request, Response, html_response, redirect
from echomq.verbs import discovery, registry

SCAN_BUDGET = 20_000  # keys looked at when no queue registry answers
MAX_QUEUES = 500  # queues shown (and read per overview) at most
EVENT_EVERY_S = 1.0  # SSE throttle: at most one update a second per client
EVENT_STREAM_S = 300.0  # a stream ends after this; EventSource reconnects by itself


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
        self.conn: Connector = conn
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

    def overview(self, queue: str) -> insight.QueueView:
        """One queue's overview (``insight.overview``, with the HOST clock's hint)."""
        return insight.overview(self.conn, queue, near_ms())

    def view(self, queue: str) -> insight.QueueView:
        """``overview``, or a partitioned queue's partitions' overviews folded into one."""
        members = self.members(queue)
        if members is None:
            return self.overview(queue)
        return insight.fold_views(queue, [self.overview(m) for m in members])

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
                return router.dispatch(self, req)
            if req.method in ("GET", "HEAD"):
                return router.dispatch(self, req)
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

    def _live(self) -> tuple[str, str]:
        """The event every open stream sends now: read at most once a second whatever the
        number of browsers watching (one overview per queue)."""
        with self._live_lock:
            at, kind, body = self._live_cache
            if time.monotonic() - at < EVENT_EVERY_S * 0.9:
                return kind, body
            try:
                body = json.dumps({"queues": {v.queue: api.view_json(v) for v in self.views()}},
                                  sort_keys=True)
                kind = "counts"
            except errors.WireError as exc:
                body, kind = json.dumps({"error": str(exc)}), "down"
            self._live_cache = (time.monotonic(), kind, body)
            return kind, body

    def events(self) -> Iterator[bytes]:
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

