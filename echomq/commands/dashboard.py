"""``echomq dashboard``: browse queues, jobs and registrations in a browser."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="serve the web dashboard (loopback by default)")
    p.add_argument("--url", default=None, help="server URL (default: $ECHOMQ_URL, else embedded)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8089)
    p.add_argument("--queue", action="append", default=None,
                   help="show these queues (default: discover them with SCAN)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..app import App
    from ..cli import default_url
    from ..connector import Connector
    from ..dashboard import serve

    app = App(default_url(args.url))
    conn = Connector.connect(app.url)
    httpd = serve(conn, args.host, args.port, args.queue)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    host, port = str(httpd.server_address[0]), int(httpd.server_address[1])
    print(f"EchoMQ dashboard on http://{host}:{port}/ (Ctrl-C to stop)", flush=True)
    stop.wait()
    httpd.shutdown()
    conn.close()
    app.close()
    return 0
