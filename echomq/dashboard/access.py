"""Who may read the dashboard and drive it: Host, Origin, the access token, read-only.

Threats: a page on another origin that rebinds its DNS name to 127.0.0.1 (DNS
rebinding) would read every page and POST actions; another site could frame the dashboard
(clickjacking) or submit a form to it (CSRF); anyone who can reach a non-loopback bind could
read payloads. The answers, all checked before a page is built or an action runs:

- ``Host`` must name the bound address and port (loopback names for a loopback bind, any
  IP literal for a wildcard bind: a rebinding attack needs a DNS name) or a name on the
  configured allow-list. Mounted in an ASGI site, the site owns its hosts (``hosts=None``).
- Every POST must carry an ``Origin`` (or, lacking one, a ``Referer``) of this very host.
- Every response forbids framing and sniffing and allows only the dashboard's own scripts,
  styles and connections (``SECURITY_HEADERS``).
- An access token, when set, is needed for everything: ``Authorization: Bearer <token>``,
  the ``echomq_dashboard`` cookie (set by ``?token=`` or the sign-in form), compared in
  constant time. A non-loopback bind refuses to start without one.
- ``read_only`` refuses every action (and the pages draw no action buttons).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

COOKIE = "echomq_dashboard"
TOKEN_ENV = "ECHOMQ_DASHBOARD_TOKEN"

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
)


def generate_token() -> str:
    """A fresh random access token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (``localhost`` counts)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("", "0.0.0.0", "::")


def _split_host(value: str) -> tuple[str, str | None]:
    """``"name:port"`` / ``"[v6]:port"`` / ``"name"`` as (lower-case name, port or None)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        name, rest = value[1:end], value[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port
    return value, None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Access:
    """The access rules of one dashboard.

    ``bind``: the (host, port) the standalone server listens on, or ``None`` when mounted
    (the site checks its own hosts). ``allow_hosts``: extra Host names (``name`` or
    ``name:port``) to accept, e.g. the name of a reverse proxy in front.
    """

    token: str | None = None
    read_only: bool = False
    bind: tuple[str, int] | None = None
    allow_hosts: frozenset[str] = frozenset()

    def host_ok(self, header: str | None) -> bool:
        """Whether a request's ``Host`` header names this dashboard."""
        if self.bind is None:
            return True
        if not header:
            return False
        name, port = _split_host(header)
        if header.strip().lower() in self.allow_hosts or name in self.allow_hosts:
            return True
        bound_host, bound_port = self.bind
        if port is not None and port != str(bound_port):
            return False
        if port is None and bound_port != 80:
            return False
        if is_wildcard(bound_host):
            return _is_ip(name) or name == "localhost"
        if is_loopback(bound_host):
            return name == "localhost" or (_is_ip(name) and is_loopback(name))
        return name == bound_host.strip("[]").lower()

    def origin_ok(self, origin: str | None, referer: str | None, host: str | None) -> bool:
        """Whether a POST comes from a page of this dashboard: its ``Origin`` (else its
        ``Referer``) names the same host and port as the request's ``Host``."""
        source = origin if origin and origin != "null" else referer
        if not source or not host:
            return False
        parts = urlsplit(source)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return parts.netloc.lower() == host.strip().lower()

    def token_ok(self, authorization: str | None, cookie: str | None) -> bool:
        """Whether the request carries the access token (always, when none is set)."""
        if self.token is None:
            return True
        expected = self.token.encode()
        bearer = authorization or ""
        if bearer.lower().startswith("bearer ") and hmac.compare_digest(
            bearer[7:].strip().encode(), expected
        ):
            return True
        return bool(cookie) and hmac.compare_digest((cookie or "").encode(), expected)

    def matches(self, candidate: str) -> bool:
        """Whether ``candidate`` is the token (constant time)."""
        return self.token is not None and hmac.compare_digest(
            candidate.encode(), self.token.encode()
        )


def check_bind(host: str, token: str | None) -> None:
    """Refuse (``ValueError``) to serve a non-loopback address without an access token."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to serve the dashboard on {host or '0.0.0.0'} without an access token: "
            f"pass --token TOKEN (or --token auto to generate one) or set {TOKEN_ENV}"
        )
