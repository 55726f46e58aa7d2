"""``echomq dashboard``: browse queues, jobs and registrations in a browser."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from typing import Any

from echomq.cli.common import port


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dashboard", help="serve the web dashboard (loopback by default)",
        description="Serve the web dashboard. On a loopback address the access token is "
        "optional; on any other address it is required (--token or $ECHOMQ_DASHBOARD_TOKEN).")
    p.add_argument("--url", default=None, help="server URL (default: $ECHOMQ_URL, else embedded)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=port, default=8089)
    p.add_argument("--app", default=None, metavar="MODULE:ATTR",
                   help="an App whose tasks (and their retry policies) to show, and whose "
                   "queues to list even while empty")
    p.add_argument("--queue", action="append", default=None,
                   help="show these queues (default: every queue the server knows)")
    p.add_argument("--token", default=None,
                   help="access token required for every page ('auto' generates one and "
                   "prints it; default: $ECHOMQ_DASHBOARD_TOKEN, else none on loopback)")
    p.add_argument("--read-only", action="store_true", help="refuse every action")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="also accept this Host header (e.g. a reverse proxy's name)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from echomq.dashboard.access import TOKEN_ENV, check_bind, generate_token

    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if token == "auto":
        token = generate_token()
    try:
        check_bind(args.host, token)
    except ValueError as exc:
        print(f"echomq dashboard: {exc}", file=sys.stderr)
        return 2

    from echomq.cli.common import default_url
    from echomq.connectors.connector import Connector
    from echomq.dashboard import serve
    from echomq.tasks.app import App

    tasks = None
    if args.app:
        from echomq.cli.worker import load_app

        tasks = load_app(args.app).tasks
    app = App(default_url(args.url))
    conn = Connector.connect(app.url)
    try:
        httpd = serve(conn, args.host, args.port, args.queue, token=token,
                      read_only=args.read_only, allow_hosts=args.allow_host, tasks=tasks)
    except OSError as exc:
        print(f"echomq dashboard: cannot listen on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        conn.close()
        app.close()
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    host, port = str(httpd.server_address[0]), int(httpd.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    link = f"http://{shown}:{port}/"
    if token:
        link += f"?token={token}"
    mode = " (read-only)" if args.read_only else ""
    print(f"EchoMQ dashboard{mode} on {link} (Ctrl-C to stop)", flush=True)
    announce_until(conn, f"http://{shown}:{port}", stop)
    httpd.shutdown()
    conn.close()
    app.close()
    return 0


def announce_until(conn: Any, base: str, stop: threading.Event) -> None:
    """Announce ``base`` in ``verbs.dashboards`` (so ``echomq job ID`` prints the job's page)
    every third of its lifetime until ``stop``, then withdraw it. A server that refuses
    the write (an ACL user without it) leaves the dashboard unannounced, nothing more."""
    from echomq.core import errors
    from echomq.verbs import dashboards

    every_s = dashboards.TTL_MS / 3000
    while True:
        # refused: no announcement, `echomq job` prints no link, the dashboard serves on
        with contextlib.suppress(errors.EchoMQError):
            dashboards.announce(conn, base)
        if stop.wait(every_s):
            break
    with contextlib.suppress(errors.EchoMQError):
        dashboards.withdraw(conn, base)
