"""Plain HTTP to a dashboard the test serves, with full control of Host, Origin and cookies
(the access rules are what the dashboard tests check)."""

from __future__ import annotations

import http.client
import urllib.parse
from typing import Any


class Client:
    """Plain HTTP to one dashboard, with full control of Host/Origin/cookies."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.port, self.host = port, host
        self.origin = f"http://{host}:{port}"
        self.cookie: str | None = None

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        hdrs = {"Host": f"{self.host}:{self.port}"}
        if self.cookie:
            hdrs["Cookie"] = self.cookie
        data = None
        if method == "POST":
            hdrs["Origin"] = self.origin
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
            data = urllib.parse.urlencode(body or {}, doseq=True).encode()
        hdrs.update(headers or {})
        hdrs = {k: v for k, v in hdrs.items() if v is not None}
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, text

    def get(self, path: str, **kw: Any) -> tuple[int, str]:
        status, _, text = self.request("GET", path, **kw)
        return status, text

    def post(self, path: str, body: dict[str, Any] | None = None, **kw: Any) -> int:
        return self.request("POST", path, body, **kw)[0]
