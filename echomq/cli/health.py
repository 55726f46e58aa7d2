"""``echomq health [--queue Q]... [--max-lag 30s] [--local]``: a probe's exit status.

Exits 0 when the server answers, each named queue has a live worker serving it (with
``--local``: one on this host) and (with ``--max-lag``) no due job has waited longer than
the bound; otherwise 1 with one line naming the failed check. It never starts a server:
with no URL it checks the embedded server recorded for the default data dir.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from echomq.cli.common import command_timeout, default_url, url_flag, where
from echomq.core import keyspace
from echomq.core.times import parse_duration

HEALTH_TIMEOUT_S = 5.0


def register(sub: Any) -> None:
    p = sub.add_parser("health", help="exit 0 when healthy, 1 with the failed check "
                       "(for probes and alerts)")
    p.add_argument("--queue", action="append", default=[], metavar="Q",
                   help="a queue that must have a live worker (repeatable)")
    p.add_argument("--max-lag", type=parse_duration, default=None, metavar="DURATION",
                   help="fail when a due job has waited longer than this (e.g. 30s) on the "
                        "named queues (all queues when none is named)")
    p.add_argument("--local", action="store_true",
                   help="count only the workers on this host (a pod's liveness probe)")
    p.add_argument("--timeout", type=parse_duration, default=None, metavar="DURATION",
                   help=f"give up on the server after this long (default "
                        f"{HEALTH_TIMEOUT_S:g}s)")
    url_flag(p)
    p.set_defaults(func=run_health)


class Unhealthy(Exception):
    """One failed health check, in words."""


def run_health(args: argparse.Namespace) -> int:
    queues = [keyspace.validate_queue(q) for q in args.queue]
    try:
        line = _health(args, queues)
    except Unhealthy as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    print(f"healthy: {line}")
    return 0


def _health_url(explicit: str | None) -> str:
    url = default_url(explicit)
    if url:
        return url
    from echomq.embedded.server import EmbeddedServer

    found = EmbeddedServer.find()
    if found is None:
        raise Unhealthy("server unreachable: no URL given (--url, $ECHOMQ_URL) and no "
                        "embedded server running for the default data dir")
    return str(found.url)


def _health(args: argparse.Namespace, queues: list[str]) -> str:
    from echomq.cli.common import explain
    from echomq.connectors.connector import Connector
    from echomq.core import errors
    from echomq.verbs import backlog, registry, workers

    url = _health_url(args.url)
    given = command_timeout(args)  # --command-timeout when --timeout is not given
    timeout = (args.timeout / 1000 if args.timeout is not None
               else given if given is not None else HEALTH_TIMEOUT_S)
    try:
        conn = Connector.connect(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    except errors.EchoMQError as exc:
        raise Unhealthy(f"server unreachable: {explain(exc, url)[0].splitlines()[0]}") from None
    try:
        try:
            live = workers.live(conn)
            lag_queues = queues or (registry.names(conn) if args.max_lag is not None else [])
            lags = {q: backlog.lag(conn, q) for q in lag_queues} if args.max_lag is not None \
                else {}
        except (errors.WireError, errors.Unavailable) as exc:
            raise Unhealthy(f"server unreachable: {where(url)} ({exc})") from None
    finally:
        conn.close()
    here = ""
    if args.local:
        host = socket.gethostname()
        live = [w for w in live if w.host == host]
        here = f" on this host ({host})"
        if not live:
            raise Unhealthy(f"no live worker{here}")
    for q in queues:
        serving = [w for w in live if w.serves(q)]
        if not serving:
            quiet = [w for w in live if w.listens(q)]
            why = (f" ({len(quiet)} quiet or stopping)" if quiet else "")
            raise Unhealthy(f"no live worker{here} for queue {q!r}{why}")
    if args.max_lag is not None:
        late = {q: ms for q, ms in lags.items() if ms is not None and ms > args.max_lag}
        if late:
            q, ms = max(late.items(), key=lambda kv: kv[1])
            raise Unhealthy(f"oldest due job on queue {q!r} has waited {ms / 1000:.1f} s, "
                            f"over --max-lag {args.max_lag / 1000:g} s")
    parts = [f"server {where(url)} answers", f"{len(live)} live workers{here}"]
    if queues:
        parts.append("serving " + ", ".join(queues))
    if lags:
        worst = max((ms for ms in lags.values() if ms is not None), default=0)
        parts.append(f"oldest due job waited {worst / 1000:.1f} s")
    return "; ".join(parts)
