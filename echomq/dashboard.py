"""A small web dashboard: browse queues, jobs and registrations, and act on them.

Standard library only (``http.server``), one sync ``Connector``, loopback by default.
Pages: ``/`` (every queue with its counts per state), ``/q/<queue>`` (the counts, the
lifecycle table from ``echomq.states``, a page of jobs per state), ``/q/<queue>/job/<id>``
(the row), ``/q/<queue>/repeat`` (registrations with their next runs). Actions (POST, with
a per-process form token against cross-site posts): revive a dead job, cancel a
registration. ``/api/queues`` and ``/api/q/<queue>`` answer JSON.

Times shown are the scores as stored: SERVER ms for the schedule, leases, completion and
death; HOST ms for registrations (see the README's clocks).
"""

from __future__ import annotations

import html
import json
import secrets
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from . import dead, discovery, errors, jobs, keyspace, repeat, states
from .connector import Connector

SCAN_BUDGET = 200_000  # keys looked at per queue discovery; a dashboard must not stall the server
PAGE = 50


def discover_queues(conn: Connector) -> list[str]:
    """Queue names found by their sorted sets, on every primary of a cluster
    (``discovery.queues``, bounded by ``SCAN_BUDGET`` keys per node)."""
    return discovery.queues(conn, SCAN_BUDGET)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f3f3f3}a{color:#0550ae}code{font-size:13px}.n{text-align:right}
nav a{margin-right:1em}form{display:inline}
"""


class Dashboard:
    """The pages and actions, on one connector (thread safe: the connector pools)."""

    def __init__(self, conn: Connector, queues: list[str] | None = None) -> None:
        self.conn = conn
        self.fixed_queues = queues
        self.token = secrets.token_urlsafe(16)

    def queues(self) -> list[str]:
        return self.fixed_queues if self.fixed_queues else discover_queues(self.conn)

    # -- JSON -----------------------------------------------------------------------------

    def api_queues(self) -> dict[str, Any]:
        return {q: jobs.counts(self.conn, q) for q in self.queues()}

    def api_queue(self, queue: str) -> dict[str, Any]:
        return {
            "queue": queue,
            "counts": jobs.counts(self.conn, queue),
            "repeat": repeat.count(self.conn, queue),
            "server_now_ms": jobs.server_now_ms(self.conn),
        }

    # -- HTML -----------------------------------------------------------------------------

    def _page(self, title: str, body: str) -> str:
        return (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body><nav><a href='/'>EchoMQ</a></nav>"
            f"<h1>{_e(title)}</h1>{body}</body></html>"
        )

    def index(self) -> str:
        rows = []
        for q, counts in self.api_queues().items():
            cells = "".join(f"<td class='n'>{counts[s]}</td>" for s in jobs.STATE_SETS)
            rows.append(f"<tr><td><a href='/q/{quote(q)}'>{_e(q)}</a></td>{cells}</tr>")
        head = "".join(f"<th>{s}</th>" for s in jobs.STATE_SETS)
        table = f"<table><tr><th>queue</th>{head}</tr>{''.join(rows)}</table>"
        return self._page("Queues", table if rows else "<p>No queues yet.</p>")

    def queue(self, queue: str, state: str, start: int) -> str:
        info = self.api_queue(queue)
        tabs = " ".join(
            f"<a href='/q/{quote(queue)}?state={s}'>{s} ({info['counts'][s]})</a>"
            for s in jobs.STATE_SETS
        )
        entries = jobs.page(self.conn, queue, state, start, PAGE)
        meaning = {"scheduled": "run at", "active": "lease until", "completed": "completed",
                   "dead": "died", "pending": "claim order"}[state]
        rows = []
        for e in entries:
            link = f"/q/{quote(queue)}/job/{quote(e['id'])}"
            score = "-" if state == "pending" else _when(e["score"])
            act = ""
            if state == "dead":
                act = self._form(f"/q/{quote(queue)}/dead/{quote(e['id'])}/retry", "retry")
            rows.append(
                f"<tr><td><a href='{link}'><code>{_e(e['id'])}</code></a></td><td>{score}</td>"
                f"<td class='n'>{_e(e['attempts'])}</td><td>{_e(e['error'] or '')}</td>"
                f"<td>{act}</td></tr>"
            )
        nav = ""
        if start > 0:
            nav += f"<a href='?state={state}&start={max(0, start - PAGE)}'>newer</a> "
        if len(entries) == PAGE:
            nav += f"<a href='?state={state}&start={start + PAGE}'>more</a>"
        body = (
            f"<p>{tabs} · <a href='/q/{quote(queue)}/repeat'>registrations "
            f"({info['repeat']})</a> · server now {_when(info['server_now_ms'])}</p>"
            f"<h2>{state}</h2><table><tr><th>id</th><th>{meaning}</th><th>attempts</th>"
            f"<th>last error</th><th></th></tr>{''.join(rows)}</table><p>{nav}</p>"
            f"<h2>Lifecycle</h2>{self._states_table()}"
        )
        return self._page(f"Queue {queue}", body)

    def _states_table(self) -> str:
        rows = "".join(
            f"<tr><td><code>{t.verb}</code></td><td>{', '.join(t.source) or '(new)'}</td>"
            f"<td>{t.target}</td><td>{t.clock}</td><td>{_e(t.note)}</td></tr>"
            for t in states.TRANSITIONS
        )
        head = "<tr><th>verb</th><th>from</th><th>to</th><th>clock</th><th>note</th></tr>"
        return f"<table>{head}{rows}</table>"

    def job(self, queue: str, job_id: str) -> str | None:
        row = jobs.get(self.conn, queue, job_id)
        if row is None:
            return None
        items = []
        for k, v in sorted(row.items()):
            shown = v.decode(errors="replace") if isinstance(v, bytes) else v
            if k in ("completed_at", "died_at"):
                shown = f"{shown} ({_when(int(shown))})"
            items.append(f"<tr><th>{_e(k)}</th><td><code>{_e(shown)}</code></td></tr>")
        back = f"<p>queue <a href='/q/{quote(queue)}'>{_e(queue)}</a></p>"
        return self._page(f"Job {job_id}", f"{back}<table>{''.join(items)}</table>")

    def registrations(self, queue: str) -> str:
        rows = []
        for entry in repeat.records(self.conn, queue):
            cadence = entry.get("cron") or f"every {entry.get('every_ms')} ms"
            try:
                upcoming = ", ".join(d.isoformat() for d in repeat.next_runs(entry, 3))
            except (ValueError, KeyError, TypeError) as exc:
                upcoming = f"({exc})"
            cancel = self._form(f"/q/{quote(queue)}/repeat/{quote(entry['name'])}/cancel", "cancel")
            rows.append(
                f"<tr><td>{_e(entry['name'])}</td><td><code>{_e(cadence)}</code> "
                f"{_e(entry.get('tz') or '')}</td><td>{_when(entry.get('next_at'))}</td>"
                f"<td>{_e(upcoming)}</td><td class='n'>{_e(entry.get('fired', 0))}</td>"
                f"<td>{cancel}</td></tr>"
            )
        table = (
            "<table><tr><th>name</th><th>cadence</th><th>next run (host clock)</th>"
            f"<th>then</th><th>fired</th><th></th></tr>{''.join(rows)}</table>"
        )
        return self._page(f"Registrations on {queue}", table)

    def _form(self, action: str, label: str) -> str:
        return (
            f"<form method='post' action='{action}'><input type='hidden' name='token' "
            f"value='{self.token}'><button>{label}</button></form>"
        )

    # -- actions --------------------------------------------------------------------------

    def act(self, parts: list[str]) -> str:
        """POST /q/<queue>/dead/<id>/retry or /q/<queue>/repeat/<name>/cancel; the redirect."""
        if len(parts) == 5 and parts[0] == "q" and parts[2] == "dead" and parts[4] == "retry":
            dead.revive(self.conn, parts[1], parts[3])
            return f"/q/{quote(parts[1])}?state=dead"
        if len(parts) == 5 and parts[0] == "q" and parts[2] == "repeat" and parts[4] == "cancel":
            repeat.cancel(self.conn, parts[1], parts[3])
            return f"/q/{quote(parts[1])}/repeat"
        raise LookupError("no such action")


def _handler(board: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "EchoMQDashboard"

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            pass

        def _send(self, code: int, body: str, kind: str = "text/html; charset=utf-8") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _parts(self) -> tuple[list[str], dict[str, list[str]]]:
            url = urlsplit(self.path)
            return [unquote(p) for p in url.path.split("/") if p], parse_qs(url.query)

        def do_GET(self) -> None:
            parts, query = self._parts()
            try:
                if not parts:
                    return self._send(200, board.index())
                if parts == ["api", "queues"]:
                    return self._send(200, json.dumps(board.api_queues()), "application/json")
                if len(parts) == 3 and parts[:2] == ["api", "q"]:
                    keyspace.validate_queue(parts[2])
                    body = json.dumps(board.api_queue(parts[2]))
                    return self._send(200, body, "application/json")
                if parts[0] == "q" and len(parts) >= 2:
                    queue = keyspace.validate_queue(parts[1])
                    if len(parts) == 2:
                        state = query.get("state", ["pending"])[0]
                        start = int(query.get("start", ["0"])[0])
                        return self._send(200, board.queue(queue, state, max(0, start)))
                    if len(parts) == 4 and parts[2] == "job":
                        page = board.job(queue, parts[3])
                        if page is not None:
                            return self._send(200, page)
                    if len(parts) == 3 and parts[2] == "repeat":
                        return self._send(200, board.registrations(queue))
                return self._send(404, board._page("Not found", "<p>Nothing here.</p>"))
            except (ValueError, TypeError) as exc:
                return self._send(400, board._page("Bad request", f"<p>{_e(exc)}</p>"))
            except errors.EchoMQError as exc:
                return self._send(502, board._page("Server error", f"<p>{_e(exc)}</p>"))

        def do_POST(self) -> None:
            parts, _ = self._parts()
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(min(length, 10_000)).decode(errors="replace"))
            if form.get("token", [""])[0] != board.token:
                page = board._page("Forbidden", "<p>Missing or stale form token.</p>")
                return self._send(403, page)
            try:
                target = board.act(parts)
            except LookupError:
                return self._send(404, board._page("Not found", "<p>No such action.</p>"))
            except (ValueError, TypeError, errors.EchoMQError) as exc:
                return self._send(400, board._page("Refused", f"<p>{_e(exc)}</p>"))
            self.send_response(303)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


def serve(
    conn: Connector, host: str = "127.0.0.1", port: int = 8089, queues: list[str] | None = None
) -> ThreadingHTTPServer:
    """A started dashboard server (in a daemon thread); ``.shutdown()`` stops it."""
    board = Dashboard(conn, queues)
    httpd = ThreadingHTTPServer((host, port), _handler(board))
    httpd.board = board  # type: ignore[attr-defined]
    threading.Thread(target=httpd.serve_forever, name="echomq-dashboard", daemon=True).start()
    return httpd
