"""Server URLs: one form for a single server, one for a Valkey Cluster.

A single server: ``valkey://[user:password@]host:port[/db]`` (``valkeys://`` for TLS;
``redis://``, ``rediss://`` and ``unix://`` too). A cluster:
``valkey+cluster://[user:password@]host:port[,host:port...]`` (``valkeys+cluster://`` for
TLS; ``redis+cluster://`` and ``rediss+cluster://`` are the same). The listed nodes are
startup nodes: any one that answers is enough, the client discovers the rest and routes
every queue's calls to the node owning its hash tag's slot. A cluster has one database, so
a path other than ``/`` or ``/0`` is refused; query options (``?socket_timeout=5``) pass to
every node's connections, as for a single server. The TLS settings ``tls_ca``, ``tls_cert``,
``tls_key`` and ``tls_verify`` are taken out of the query (``Target.tls``) for
``echomq.connectors.tls``, the one place that reads them.

Pure: parsing only, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

SINGLE = ("valkey", "valkeys", "redis", "rediss", "unix")
CLUSTER_SUFFIX = "+cluster"


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect: ``url`` is a single-node URL valkey-py understands (for a cluster,
    the first startup node's, credentials and options included); ``nodes`` every startup
    node as ``(host, port)``."""

    url: str
    cluster: bool
    nodes: tuple[tuple[str, int], ...] = ()
    tls: bool = False
    #: the URL's TLS settings (``tls_ca`` ...), taken out of ``url``'s query
    tls_query: tuple[tuple[str, str], ...] = ()


TLS_NAMES = ("tls_ca", "tls_cert", "tls_key", "tls_verify")


def _take_tls(url: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``url`` without its ``tls_*`` query parameters, and those parameters."""
    head, sep, query = url.partition("?")
    if not sep:
        return url, ()
    pairs = parse_qsl(query, keep_blank_values=True)
    tls = tuple((k, v) for k, v in pairs if k in TLS_NAMES)
    if not tls:
        return url, ()
    rest = urlencode([(k, v) for k, v in pairs if k not in TLS_NAMES])
    return head + (f"?{rest}" if rest else ""), tls


def given(url: str | None) -> str | None:
    """``url`` as a setting: ``None`` when it is unset, empty or only blanks (``App("")``,
    ``ECHOMQ_URL=``, ``--url ""``), so every entry point reads an empty URL as no URL (the
    embedded server) instead of some refusing it; else the URL, stripped."""
    if url is None:
        return None
    if not isinstance(url, str):
        raise TypeError(f"a server URL is a str, not {type(url).__name__}")
    return url.strip() or None


def parse(url: str) -> Target:
    """Split ``url`` into what a client needs; ``ValueError`` for anything else, before
    any I/O."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"not a server URL: {url!r} (expected valkey://host:port/db or "
                         "valkey+cluster://host:port,host:port)")
    url, tls_query = _take_tls(url)
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if not scheme.endswith(CLUSTER_SUFFIX):
        if scheme not in SINGLE:
            raise ValueError(f"unsupported URL scheme {scheme!r} (use one of "
                             f"{', '.join(SINGLE)}, or valkey+cluster / valkeys+cluster)")
        return Target(url, cluster=False, tls=scheme in ("valkeys", "rediss"),
                      tls_query=tls_query)
    base = scheme[: -len(CLUSTER_SUFFIX)]
    if base not in ("valkey", "valkeys", "redis", "rediss"):
        raise ValueError(f"unsupported cluster URL scheme {scheme!r} "
                         "(use valkey+cluster or valkeys+cluster)")
    netloc, sep, tail = _split_netloc(rest)
    userinfo, at, hostlist = netloc.rpartition("@")
    nodes = tuple(_node(part, url) for part in hostlist.split(",") if part.strip())
    if not nodes:
        raise ValueError(f"a cluster URL names at least one host:port: {url!r}")
    parts = urlsplit(f"x://h{sep}{tail}")
    path, query = parts.path, parts.query
    if path not in ("", "/", "/0"):
        raise ValueError(f"a cluster has one database (0); {url!r} names {path!r}")
    host, port = nodes[0]
    host_text = f"[{host}]" if ":" in host else host
    single = f"{base}://{userinfo}{at}{host_text}:{port}" + (f"?{query}" if query else "")
    return Target(single, cluster=True, nodes=nodes, tls=base in ("valkeys", "rediss"),
                  tls_query=tls_query)


def cluster_url(nodes: list[tuple[str, int]], *, password: str | None = None,
                username: str | None = None, tls: bool = False) -> str:
    """The cluster URL naming ``nodes`` (``valkey+cluster://[user:pw@]h:p,h:p``)."""
    if not nodes:
        raise ValueError("a cluster URL names at least one node")
    auth = ""
    if password:
        auth = f"{quote(username or '', safe='')}:{quote(password, safe='')}@"
    hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in nodes)
    return f"{'valkeys' if tls else 'valkey'}{CLUSTER_SUFFIX}://{auth}{hosts}"


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs and banners)."""
    scheme, sep, rest = url.partition("://")
    netloc, nsep, tail = _split_netloc(rest)
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{scheme}{sep}{userinfo}{at}{hosts}{nsep}{tail}"


def _split_netloc(rest: str) -> tuple[str, str, str]:
    """``host-part``, the separator (``/`` or ``?`` or empty) and what follows it."""
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=-1)
    if cut < 0:
        return rest, "", ""
    return rest[:cut], rest[cut], rest[cut + 1:]


def _node(part: str, url: str) -> tuple[str, int]:
    part = unquote(part.strip())
    if part.startswith("["):  # [ipv6]:port
        host, _, port_text = part[1:].partition("]:")
    else:
        host, _, port_text = part.rpartition(":")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"not a host:port in cluster URL {url!r}: {part!r}")
    return host, int(port_text)
