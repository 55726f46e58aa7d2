"""``echomq pause QUEUE... [--until T]``: keep queues from being claimed.

``pause`` keeps a queue from being claimed (it still admits and promotes); with ``--until T``
(an ISO-8601 instant, epoch ms, or a duration from the server's now such as ``30m``) it
resumes by itself at that instant on the SERVER clock. ``echomq resume`` undoes it (and
shares ``pause_or_resume``); ``echomq stats`` shows which queues are paused.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from echomq.cli.common import connect, fail, until_ms, until_type, url_flag
from echomq.cli.known import check, force_flag
from echomq.core import keyspace


def register(sub: Any) -> None:
    p = sub.add_parser("pause", help="stop claims on queues (admission and promote go on)")
    p.add_argument("queues", nargs="+", metavar="QUEUE")
    p.add_argument("--until", type=until_type, default=None, metavar="T",
                   help="resume by itself at T: an ISO-8601 instant, epoch ms, or a "
                        "duration from the server's now (30m, 2h)")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_pause)


def pause_or_resume(args: argparse.Namespace, pause: bool) -> int:
    from echomq.verbs import jobs

    try:
        queues = [keyspace.validate_queue(q) for q in args.queues]
    except ValueError as exc:
        return fail(str(exc))
    conn, app = connect(args)
    try:
        check(conn, queues, force=args.force)
        until = getattr(args, "until", None)
        end = until_ms(conn, until) if until is not None else None
        for queue in queues:
            if pause:
                jobs.pause(conn, queue, until=end)
            else:
                jobs.resume(conn, queue)
            note = "" if end is None else f" until {_iso(end)}"
            print(f"{queue} {'paused' if pause else 'resumed'}{note}")
    finally:
        app.close()
    return 0


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def run_pause(args: argparse.Namespace) -> int:
    return pause_or_resume(args, True)
