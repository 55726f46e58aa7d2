"""``echomq server``: run an embedded Valkey in the foreground and print its URL."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("server", help="run an embedded Valkey in the foreground")
    p.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    p.add_argument("--unix-socket", default=None, help="listen on a unix socket instead")
    p.add_argument(
        "--data-dir", default=None, help="data directory (default: ~/.local/share/echomq)"
    )
    p.add_argument("--ephemeral", action="store_true", help="temp dir, no AOF: nothing is kept")
    p.add_argument("--password", default=None, help="password (default: generated)")
    p.add_argument("--no-native", action="store_true", help="do not load the EMQ module")
    p.add_argument("--loadmodule", action="append", default=[], help="extra module to load")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..server import EmbeddedServer

    srv = EmbeddedServer(
        port=args.port,
        unix_socket=args.unix_socket,
        data_dir=args.data_dir,
        ephemeral=args.ephemeral,
        password=args.password,
        native=not args.no_native,
        loadmodules=args.loadmodule,
    )
    srv.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"echomq server pid {srv.pid} data {srv.data_dir}", flush=True)
    print(f"modules: {', '.join(srv.modules()) or 'none'}", flush=True)
    print(srv.url, flush=True)
    try:
        while not stop.wait(0.5):
            if not srv.running():
                print("valkey-server exited:\n" + srv.log_tail())
                return 1
    finally:
        srv.stop()
    return 0
