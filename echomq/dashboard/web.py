"""The request and response the dashboard's core speaks, whatever server carries them.

The core (``Dashboard.handle``) is a plain function from ``Request`` to ``Response``; the
stdlib server (``echomq.dashboard.stdlib``) and the ASGI adapter (``echomq.dashboard.asgi``)
only translate. A streamed body (Server-Sent Events) is an iterator of byte chunks that
the adapter writes as they come.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote


@dataclass
class Request:
    """One request. ``path`` is below the mount point (starts with ``/``); ``root`` is the
    mount prefix (``""`` standalone, e.g. ``"/admin/queues"`` in an ASGI site)."""

    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    root: str = ""

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default

    def form(self) -> dict[str, list[str]]:
        kind = self.headers.get("content-type", "")
        if "application/x-www-form-urlencoded" not in kind and kind:
            return {}
        return parse_qs(self.body.decode(errors="replace"), keep_blank_values=True)

    def cookie(self, name: str) -> str | None:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(self.headers.get("cookie", ""))
        except Exception:
            return None
        morsel = jar.get(name)
        return morsel.value if morsel is not None else None

    def url(self, path: str) -> str:
        """An absolute path under this mount (``path`` starts with ``/``)."""
        return self.root + path


@dataclass
class Response:
    status: int
    body: bytes | Iterator[bytes] = b""
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def streamed(self) -> bool:
        return not isinstance(self.body, bytes)


def e(value: object) -> str:
    """HTML-escaped text (quotes too: safe in attributes)."""
    return html.escape(str(value), quote=True)


def q(value: str) -> str:
    """A URL path segment."""
    return quote(value, safe="")


def html_response(status: int, page: str, *extra: tuple[str, str]) -> Response:
    return Response(status, page.encode(), [("Content-Type", "text/html; charset=utf-8"),
                                            *extra])


def redirect(location: str, *extra: tuple[str, str]) -> Response:
    return Response(303, b"", [("Location", location), *extra])


def json_response(body: str, status: int = 200) -> Response:
    return Response(status, body.encode(), [("Content-Type", "application/json")])
