"""``echomq server``: the embedded Valkey of a data dir.

``echomq server`` runs it in the foreground (Ctrl-C stops it); ``start`` starts it detached
(as ``App()`` does when no URL is given); ``stop`` ends the running one; ``status`` says
whether it runs (URL without the password, pid, data dir, uptime); ``url`` prints the full
URL, password included, for ``export ECHOMQ_URL=$(echomq server url)``. Every form finds the
server through the data dir's record, so a worker or dashboard started without ``--url``
uses the same server.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any

from echomq.cli.common import port

ACTIONS = ("run", "start", "stop", "status", "url")
NOT_RUNNING = 3  # the LSB exit status of "program is not running"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "server",
        help="the embedded Valkey: run in the foreground, or start|stop|status|url",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", nargs="?", choices=ACTIONS, default="run",
                   help="run (default: foreground), start (detached), stop, status, url")
    p.add_argument("--data-dir", default=None,
                   help="data directory (default: $ECHOMQ_DATA, else ~/.local/share/echomq)")
    p.add_argument("--fsync", choices=("everysec", "always"), default=None,
                   help="AOF fsync: everysec (default; a power loss can cost the last second) "
                        "or always (every acknowledged write is on disk)")
    p.add_argument("--port", type=port, default=None,
                   help="TCP port (default: the last one used, else a free one)")
    p.add_argument("--unix-socket", default=None, help="listen on a unix socket instead")
    p.add_argument("--ephemeral", action="store_true", help="temp dir, no AOF: nothing is kept")
    p.add_argument("--password", default=None,
                   help="password (default: generated once, kept in the data dir's record)")
    p.add_argument("--json", action="store_true",
                   help="status: one JSON object (no password) instead of lines")
    p.add_argument("--no-native", action="store_true", help="do not load the EMQ module")
    p.add_argument("--loadmodule", action="append", default=[], help="extra module to load")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from echomq.core.errors import ConfigError
    from echomq.embedded.launch import ServerError

    try:
        return int(globals()[f"_{args.action}"](args))
    except (ConfigError, ServerError, ValueError) as exc:
        print(f"echomq server: {exc}", file=sys.stderr)
        return 1


def _data_dir(args: argparse.Namespace) -> Any:
    from echomq.embedded.launch import default_data_dir

    return args.data_dir or default_data_dir()


def _describe(record: Any, info: dict[str, Any] | None) -> str:
    lines = [
        f"running     pid {record.pid}",
        f"url         {record.public_url}  (password: in {record.data_dir}/echomq-server.json;"
        " `echomq server url` prints the full URL)",
        f"data dir    {record.data_dir}",
    ]
    if info is not None:
        lines += [
            f"uptime      {_duration(info['uptime_s'])}",
            f"durability  {info['appendfsync'] if info['aof'] else 'none (no AOF)'}",
            f"keys        {info['keys']}   memory {info['used_memory_human']}",
            f"modules     {', '.join(info['modules']) or 'none'}",
            f"version     valkey {info['version']}",
        ]
    return "\n".join(lines)


def _duration(seconds: int) -> str:
    d, rest = divmod(seconds, 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s"]
    return " ".join(p for p in parts if p)


def _status(args: argparse.Namespace) -> int:
    from echomq.embedded.recorded import server_info
    from echomq.embedded.server import EmbeddedServer

    path = _data_dir(args)
    found = EmbeddedServer.find(path)
    if args.json:
        body: dict[str, Any] = {"running": found is not None, "data_dir": str(path)}
        if found is not None:
            body.update(pid=found.pid, url=found.public_url, **server_info(found))
        print(json.dumps(body), flush=True)
        return 0 if found is not None else NOT_RUNNING
    if found is None:
        print(f"not running (data dir {path}); `echomq server start` starts it", flush=True)
        return NOT_RUNNING
    print(_describe(found, server_info(found)), flush=True)
    return 0


def _url(args: argparse.Namespace) -> int:
    from echomq.embedded.server import EmbeddedServer

    path = _data_dir(args)
    found = EmbeddedServer.find(path)
    if found is None:
        print(f"echomq server: not running (data dir {path})", file=sys.stderr)
        return NOT_RUNNING
    print(found.url, flush=True)
    return 0


def _stop(args: argparse.Namespace) -> int:
    from echomq.embedded.server import EmbeddedServer

    path = _data_dir(args)
    stopped = EmbeddedServer.stop_recorded(path)
    if stopped is None:
        print(f"not running (data dir {path})", flush=True)
        return 0
    print(f"stopped the embedded server pid {stopped.pid} (data dir {path})", flush=True)
    return 0


def _start(args: argparse.Namespace) -> int:
    from echomq.embedded.recorded import server_info
    from echomq.embedded.server import EmbeddedServer

    _only_run_flags(args)
    before = EmbeddedServer.find(_data_dir(args))
    found = EmbeddedServer.find_or_start(
        _data_dir(args), durability=args.fsync, native=not args.no_native
    )
    print("already running" if before is not None and before.pid == found.pid else "started",
          flush=True)
    print(_describe(found, server_info(found)), flush=True)
    return 0


def _only_run_flags(args: argparse.Namespace) -> None:
    given = [flag for flag, value in (("--port", args.port), ("--unix-socket", args.unix_socket),
                                      ("--ephemeral", args.ephemeral),
                                      ("--password", args.password),
                                      ("--loadmodule", args.loadmodule)) if value]
    if given:
        raise ValueError(f"{', '.join(given)}: only for `echomq server` in the foreground")


def _run(args: argparse.Namespace) -> int:
    from echomq.embedded import datadir
    from echomq.embedded.server import EmbeddedServer

    path = None if args.ephemeral else _data_dir(args)
    last = None
    if path is not None:
        live = EmbeddedServer.find(path)
        if live is not None:
            print(f"echomq server: already running for {path} (pid {live.pid}, "
                  f"{live.public_url}); `echomq server stop` first", file=sys.stderr)
            return 1
        last = datadir.read(datadir.secure(path))
    port = args.port
    if port is None and last is not None and not args.unix_socket and last.port:
        from echomq.embedded.launch import port_in_use

        port = None if port_in_use(last.host, last.port) else last.port
    srv = EmbeddedServer(
        port=port,
        unix_socket=args.unix_socket,
        data_dir=args.data_dir if args.ephemeral else path,
        ephemeral=args.ephemeral,
        password=args.password if args.password is not None
        else (last.password if last is not None and last.password else None),
        native=not args.no_native,
        loadmodules=args.loadmodule,
        durability=args.fsync,
    )
    srv.start()
    if path is not None:
        with datadir.locked(srv.data_dir):
            datadir.write(srv.data_dir, srv.record())
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"echomq server pid {srv.pid} data {srv.data_dir}"
          f"{' (ephemeral)' if args.ephemeral else f' durability {srv.durability}'}", flush=True)
    print(f"modules: {', '.join(srv.modules()) or 'none'}", flush=True)
    print(f"listening on {srv.public_url}", flush=True)
    if path is None:
        print(f"full URL (password included): {srv.url}", flush=True)
    else:
        print("clients without --url or ECHOMQ_URL find it through the data dir; "
              "`echomq server url` prints the full URL", flush=True)
    t0, pid = time.monotonic(), srv.pid
    try:
        while not stop.wait(0.5):
            if not srv.running():
                rec = None
                if path is not None:
                    # under the lock: `server stop` holds it from its SIGTERM until it has
                    # marked the record stopped, so an exit it caused is never taken for a crash
                    with datadir.locked(srv.data_dir):
                        rec = datadir.read(srv.data_dir)
                if rec is not None and rec.pid is None:
                    print("stopped by `echomq server stop`", flush=True)
                    return 0
                print("valkey-server exited:\n" + srv.log_tail(), file=sys.stderr)
                return 1
    finally:
        srv.stop()
        if path is not None:
            with datadir.locked(srv.data_dir):
                rec = datadir.read(srv.data_dir)
                if rec is not None and rec.pid == pid:
                    datadir.write(srv.data_dir, rec.stopped())
    print(f"stopped after {_duration(int(time.monotonic() - t0))}", flush=True)
    return 0
