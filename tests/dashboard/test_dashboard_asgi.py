"""The same dashboard mounted in an ASGI site (Starlette) under a prefix, with the site's own
auth in front: links stay under the prefix, actions still need a same-origin POST."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from echomq.core import ids
from echomq.dashboard.asgi import dashboard_app
from echomq.verbs import jobs


class SiteAuth(BaseHTTPMiddleware):
    """The site's own sign-in: a header stands in for its session."""

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        if request.headers.get("x-site-user") != "ada":
            return PlainTextResponse("site login required", status_code=401)
        return await call_next(request)  # type: ignore[no-any-return]


def site(conn: Any, queue: str, **kw: Any) -> Starlette:
    async def home(request: Request) -> Response:
        return PlainTextResponse("the site's own page")

    return Starlette(
        routes=[Route("/", home),
                Mount("/admin/queues", app=dashboard_app(conn, [queue], **kw))],
        middleware=[Middleware(SiteAuth)],
    )


def test_mounted_under_a_prefix_behind_the_sites_auth(conn, queue):
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, b"x")
    c = jobs.claim(conn, queue, 10_000)
    assert c is not None
    jobs.retry(conn, queue, jid, c.token, 0, 1, "boom")
    client = TestClient(site(conn, queue), follow_redirects=False)
    assert client.get("/admin/queues/").status_code == 401  # the site's auth answers
    me = {"x-site-user": "ada"}
    r = client.get("/admin/queues/", headers=me)
    assert r.status_code == 200 and queue in r.text
    assert f"href='/admin/queues/q/{queue}" in r.text
    assert "/admin/queues/static/dashboard.css" in r.text
    assert r.headers["x-frame-options"] == "DENY"
    css = client.get("/admin/queues/static/dashboard.css", headers=me)
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    page = client.get(f"/admin/queues/q/{queue}?state=dead", headers=me)
    assert page.status_code == 200 and jid in page.text
    assert f"/admin/queues/q/{queue}/job/{jid}" in page.text
    action = f"/admin/queues/q/{queue}/job/{jid}/retry"
    assert client.post(action, headers=me).status_code == 403  # no Origin
    assert client.post(action, headers={**me, "origin": "http://evil.example"}).status_code == 403
    r = client.post(action, headers={**me, "origin": "http://testserver"})
    assert r.status_code == 303 and r.headers["location"] == f"/admin/queues/q/{queue}/job/{jid}"
    assert jobs.get(conn, queue, jid)["state"] == "pending"
    assert client.get("/admin/queues/metrics", headers=me).text.startswith("# HELP")
    assert client.get("/", headers=me).text == "the site's own page"


def test_mounted_read_only_with_a_token(conn, queue):
    client = TestClient(site(conn, queue, token="t", read_only=True), follow_redirects=False)
    me = {"x-site-user": "ada"}
    assert client.get("/admin/queues/", headers=me).status_code == 401
    r = client.get("/admin/queues/?token=t", headers=me)
    assert r.status_code == 303 and "Path=/admin/queues" in r.headers["set-cookie"]
    ok = client.get("/admin/queues/", headers={**me, "authorization": "Bearer t"})
    assert ok.status_code == 200
    r = client.post(f"/admin/queues/q/{queue}/pause",
                    headers={**me, "authorization": "Bearer t", "origin": "http://testserver"})
    assert r.status_code == 403 and not jobs.is_paused(conn, queue)
