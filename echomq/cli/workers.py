"""``echomq workers [quiet|stop ID|--all]``: the live worker processes.

``echomq workers`` lists the live worker processes (the registry they heartbeat into:
``echomq.verbs.workers``): id, host, pid, queues, busy n/N, uptime, last seen; ``--busy``
(or ``echomq inspect``) lists every job they run now; ``--json`` prints one object per live
worker, with the jobs it runs in its ``busy`` list (with or without ``--busy``).
``echomq workers quiet ID|--all`` stops claims (running jobs finish; the worker stays up)
and ``echomq workers stop ID|--all`` stops workers as SIGTERM does; a worker acts on the
request as soon as it arrives.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echomq.cli.common import connect, url_flag


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
