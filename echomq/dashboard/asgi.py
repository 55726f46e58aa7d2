"""The dashboard as an ASGI application, to mount in an existing site under a prefix.

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from echomq.dashboard.asgi import dashboard_app
    site = Starlette(routes=[Mount("/admin/queues", app=dashboard_app(url))])

No dependency: the adapter speaks plain ASGI (HTTP only) and runs the dashboard's sync core
in a worker thread, one request at a time per thread, as the stdlib server does. The site's
own auth goes in front (middleware); the mounted dashboard checks no ``Host`` (the site owns
its hosts), still checks ``Origin`` on every POST, and needs a token only if given one.
The mount prefix comes from the ASGI ``root_path``, so every link stays under it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from echomq.connectors.connector import Connector
from echomq.dashboard.access import Access
from echomq.dashboard.routes import Dashboard
from echomq.dashboard.web import Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class DashboardApp:
    """An ASGI app around a ``Dashboard``."""

    def __init__(self, board: Dashboard) -> None:
        self.board = board

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        root = scope.get("root_path", "") or ""
        path = scope.get("path", "/") or "/"
        if root and path.startswith(root):  # Starlette keeps the full path in a Mount
            path = path[len(root):] or "/"
        req = Request(
            method=scope["method"],
            path=path,
            query=parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True),
            headers={k.decode("latin-1").lower(): v.decode("latin-1")
                     for k, v in scope.get("headers", [])},
            body=body,
            root=root.rstrip("/"),
        )
        resp = await asyncio.to_thread(self.board.handle, req)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers]
        await send({"type": "http.response.start", "status": resp.status, "headers": headers})
        if isinstance(resp.body, bytes):
            await send({"type": "http.response.body", "body": resp.body})
            return
        stream = iter(resp.body)
        try:
            while True:
                chunk = await asyncio.to_thread(next, stream, None)
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        await send({"type": "http.response.body", "body": b""})


def dashboard_app(
    url_or_conn: str | Connector,
    queues: list[str] | None = None,
    *,
    token: str | None = None,
    read_only: bool = False,
    tasks: Mapping[str, Any] | None = None,
) -> DashboardApp:
    """The dashboard for the server at ``url_or_conn``, as an ASGI app to mount
    (``tasks``: an App's ``app.tasks``, to show their retry policies)."""
    conn = (Connector.connect(url_or_conn) if isinstance(url_or_conn, str) else url_or_conn)
    return DashboardApp(Dashboard(conn, queues, Access(token=token, read_only=read_only),
                                  tasks=tasks))
