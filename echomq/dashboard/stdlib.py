"""The standalone server: the standard library's threading ``http.server``, no dependency.

One thread per connection (a Server-Sent Events stream holds its thread until it ends,
``app.EVENT_STREAM_S`` at most, or the browser goes away).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from echomq.connectors.connector import Connector
from echomq.dashboard.access import Access
from echomq.dashboard.routes import Dashboard
from echomq.dashboard.web import Request

MAX_BODY = 1_000_000  # a form of 500 chosen ids fits well within this


def _handler(board: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "EchoMQDashboard"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            pass

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.send_error(413)
                return
            body = self.rfile.read(length) if length else b""
            req = Request(
                method=method,
                path=url.path or "/",
                query=parse_qs(url.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            resp = board.handle(req)
            self.send_response(resp.status)
            for k, v in resp.headers:
                self.send_header(k, v)
            if isinstance(resp.body, bytes):
                self.send_header("Content-Length", str(len(resp.body)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(resp.body)
                return
            self.send_header("Connection", "close")
            self.close_connection = True
            self.end_headers()
            try:
                for chunk in resp.body:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the browser left; the stream's thread ends here
            finally:
                close = getattr(resp.body, "close", None)
                if close is not None:
                    close()

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True
    board: Dashboard

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that went away mid-request (a closed tab, a reload) is no error: say
        nothing; anything else gets the standard library's report."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def shutdown(self) -> None:
        """Stop serving and end the open event streams (their browsers reconnect)."""
        self.board.closing.set()
        super().shutdown()


def serve(
    conn: Connector,
    host: str = "127.0.0.1",
    port: int = 8089,
    queues: list[str] | None = None,
    *,
    token: str | None = None,
    read_only: bool = False,
    allow_hosts: list[str] | None = None,
    tasks: Mapping[str, Any] | None = None,
) -> DashboardServer:
    """A started dashboard server (in a daemon thread); ``.shutdown()`` stops it.

    ``tasks``: an App's tasks (``app.tasks``) to list with their retry policies.
    Refuses (``ValueError``) a non-loopback ``host`` without a ``token``. Requests must
    name the bound address (or one of ``allow_hosts``) in their ``Host`` header.
    """
    from echomq.dashboard.access import check_bind

    check_bind(host, token)
    board = Dashboard(conn, queues, tasks=tasks)
    httpd = DashboardServer((host, port), _handler(board))
    # the access rules name the bound port, known only once bound (port 0 picks one)
    board.access = Access(
        token=token, read_only=read_only, bind=(host, int(httpd.server_address[1])),
        allow_hosts=frozenset(h.lower() for h in allow_hosts or ()),
    )
    httpd.board = board
    threading.Thread(target=httpd.serve_forever, name="echomq-dashboard", daemon=True).start()
    return httpd
