"""Operating commands: ``echomq workers``, ``inspect``, ``health`` and ``purge``.

``echomq workers`` lists the live worker processes (the registry they heartbeat into:
``echomq.verbs.workers``): id, host, pid, queues, busy n/N, uptime, last seen; ``--busy``
(or ``echomq inspect``) lists every job they run now; ``--json`` prints one object per live
worker, with the jobs it runs in its ``busy`` list (with or without ``--busy``).
``echomq workers quiet ID|--all`` stops claims (running jobs finish; the worker stays up)
and ``echomq workers stop ID|--all`` stops workers as SIGTERM does; a worker acts on the
request as soon as it arrives.

``echomq health [--queue Q]... [--max-lag 30s] [--local]`` exits 0 when the server
answers, each named queue has a live worker serving it (with ``--local``: one on this
host) and (with ``--max-lag``) no due job has waited longer than the bound; otherwise 1
with one line naming the failed check. It never starts a server: with no URL it checks the
embedded server recorded for the default data dir.

``echomq purge QUEUE --state dead|pending|scheduled --yes`` deletes every job of the queue
in that state; without ``--yes`` it refuses (exit 2) before connecting.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any

from echomq.cli.common import connect, url_flag
from echomq.cli.main import default_url, where
from echomq.core import keyspace
from echomq.core.times import parse_duration

HEALTH_TIMEOUT_S = 5.0


def register(sub: Any) -> None:
    p = sub.add_parser("workers", help="live workers (id, host, pid, queues, busy, uptime); "
                       "quiet or stop them",
                       description="List the live worker processes, or ask them to quiet "
                       "(stop claiming; running jobs finish) or stop (as SIGTERM).")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--busy", action="store_true", help="list the jobs they run now")
    url_flag(p)
    p.set_defaults(func=run_workers)
    wsub = p.add_subparsers(dest="workers_command", metavar="ACTION")
    for action, text in (("quiet", "stop claiming new jobs; running jobs finish"),
                         ("stop", "drain and exit, as SIGTERM does")):
        a = wsub.add_parser(action, help=text)
        a.add_argument("id", nargs="?", help="the worker id (from `echomq workers`)")
        a.add_argument("--all", action="store_true", help="every live worker")
        a.add_argument("--url", default=argparse.SUPPRESS,
                       help="server URL (default: $ECHOMQ_URL, else embedded)")
        a.set_defaults(func=run_request, action=action)

    p = sub.add_parser("inspect", help="every job the live workers run now (workers --busy)")
    p.add_argument("--json", action="store_true", help="print JSON")
    url_flag(p)
    p.set_defaults(func=run_workers, busy=True)

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

    p = sub.add_parser("purge", help="delete every job of a queue in one state (needs --yes)")
    p.add_argument("queue")
    p.add_argument("--state", required=True, choices=("dead", "pending", "scheduled"),
                   help="which jobs to delete")
    p.add_argument("--yes", action="store_true", help="really delete them")
    url_flag(p)
    p.set_defaults(func=run_purge)


# -- workers ----------------------------------------------------------------------------

def _span(ms: int) -> str:
    """A duration as an operator reads it: 850ms, 12.3s, 4m05s, 3h02m, 2d04h."""
    if ms < 1000:
        return f"{ms}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def run_workers(args: argparse.Namespace) -> int:
    from echomq.verbs import workers

    conn, app = connect(args)
    try:
        live = workers.live(conn)
    finally:
        app.close()
    if args.json:  # one object per live worker, its running jobs in ``busy``
        print(json.dumps([w.as_dict() for w in live], indent=2))
        return 0
    if args.busy:
        running = [(w, r) for w in live for r in w.busy]
        if not running:
            print(f"(nothing running: {len(live)} live workers)")
            return 0
        _table([[w.id, r.id, r.queue, str(r.task or "?"),
                 _span(max(0, w.now_ms - r.started_ms)), str(r.attempt)] for w, r in running],
               ["WORKER", "JOB", "QUEUE", "TASK", "RUNTIME", "ATTEMPT"])
        return 0
    if args.json:
        print(json.dumps([w.as_dict() for w in live], indent=2))
        return 0
    if not live:
        print("(no live workers: start one with `echomq worker module:app`)")
        return 0
    _table([[w.id, w.host, str(w.pid), w.app, ",".join(w.queues),
             f"{len(w.busy)}/{w.slots}", w.state,
             _span(w.uptime_ms), f"{_span(w.seen_ago_ms)} ago"] for w in live],
           ["ID", "HOST", "PID", "APP", "QUEUES", "BUSY", "STATE", "UPTIME", "LAST SEEN"])
    return 0


def run_request(args: argparse.Namespace) -> int:
    from echomq.verbs import workers

    if bool(args.id) == bool(args.all):
        raise ValueError(f"give a worker id or --all (not {'both' if args.all else 'neither'})"
                         "; `echomq workers` lists the ids")
    if args.id:
        workers.control_key(args.id)  # a malformed id is refused before connecting
    args.url = getattr(args, "url", None)
    conn, app = connect(args)
    try:
        asked = workers.request(conn, "*" if args.all else args.id, args.action)
    finally:
        app.close()
    if not asked:
        if args.all:
            print("(no live workers to ask)", file=sys.stderr)
            return 0
        print(f"echomq: no live worker {args.id!r} (gone, or never registered); "
              "`echomq workers` lists the live ones", file=sys.stderr)
        return 1
    done = "quiet (no new claims; running jobs finish)" if args.action == "quiet" else (
        "stop (draining, then exit)")
    for wid in asked:
        print(f"{wid}: asked to {done}")
    return 0


# -- health -----------------------------------------------------------------------------

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
    from echomq.cli.main import explain
    from echomq.connectors.connector import Connector
    from echomq.core import errors
    from echomq.verbs import backlog, registry, workers

    url = _health_url(args.url)
    timeout = (args.timeout if args.timeout is not None else HEALTH_TIMEOUT_S * 1000) / 1000
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


# -- purge ------------------------------------------------------------------------------

def run_purge(args: argparse.Namespace) -> int:
    from echomq.verbs import purge

    queue = keyspace.validate_queue(args.queue)
    if not args.yes:
        print(f"echomq: purge deletes every {args.state} job of queue {queue!r} for good; "
              "run it again with --yes to do it (nothing was deleted)", file=sys.stderr)
        return 2
    conn, app = connect(args)
    try:
        deleted = purge.purge(conn, queue, args.state)
    finally:
        app.close()
    print(f"purged {deleted} {args.state} jobs from {queue}")
    return 0
