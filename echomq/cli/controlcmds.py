"""Job control commands: ``echomq cancel <id>...``, ``echomq pause|resume <queue>...``.

``cancel`` removes a waiting job (pending, a group lane, scheduled) or asks a running one
to stop (its worker sees the request at its next lease checkpoint); it looks the id up on
``--queue`` (repeatable), else on the queues of ``--app``, else on every queue found on the
server (the queue registry first, then a scan). Exit status 1 when an id is on no queue
(nothing waiting or running with it).

``pause`` keeps a queue from being claimed (it still admits and promotes); with ``--until T``
(an ISO-8601 instant, epoch ms, or a duration from the server's now such as ``30m``) it
resumes by itself at that instant on the SERVER clock. ``resume`` wakes its idle workers at
once. ``echomq stats`` shows which queues are paused.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from echomq.cli.common import connect, find_queue, until_ms, until_type, url_flag
from echomq.core import keyspace


def register(sub: Any) -> None:
    p = sub.add_parser("cancel", help="cancel jobs: waiting ones are removed, running ones "
                                      "stopped at their next lease checkpoint")
    p.add_argument("ids", nargs="+", metavar="ID", help="job ids")
    p.add_argument("--queue", action="append", default=None,
                   help="the job's queue (repeatable; default: the app's queues, else all)")
    p.add_argument("--app", default=None, help="module:attribute of the App (its queues)")
    url_flag(p)
    p.set_defaults(func=run_cancel)

    for verb, text in (("pause", "stop claims on queues (admission and promote go on)"),
                       ("resume", "resume claims on paused queues")):
        p = sub.add_parser(verb, help=text)
        p.add_argument("queues", nargs="+", metavar="QUEUE")
        if verb == "pause":
            p.add_argument("--until", type=until_type, default=None, metavar="T",
                           help="resume by itself at T: an ISO-8601 instant, epoch ms, or a "
                                "duration from the server's now (30m, 2h)")
        url_flag(p)
        p.set_defaults(func=run_pause if verb == "pause" else run_resume)


def _fail(message: str) -> int:
    print(f"echomq: {message}", file=sys.stderr)
    return 2


def run_cancel(args: argparse.Namespace) -> int:
    from echomq.core.outcomes import Outcome
    from echomq.verbs import flows

    try:
        named = [keyspace.validate_queue(q) for q in args.queue or []]
        for job_id in args.ids:
            if not job_id.startswith("JOB"):
                return _fail(f"{job_id!r} is not a job id (job ids start with JOB)")
    except ValueError as exc:
        return _fail(str(exc))
    declared: list[str] = []
    if args.app:
        from echomq.cli.workercmds import load_app

        declared = load_app(args.app).queues()
    conn, app = connect(args)
    missing = 0
    try:
        for job_id in args.ids:
            # the queue holding its row (registered queues first, then a scan), or --queue
            found = find_queue(conn, job_id, declared) if not named else None
            outcome = Outcome.ABSENT
            for queue in named or ([found] if found else []):
                # as app.cancel: a flow parent still waiting goes with its waiting subtree
                outcome = flows.cancel(conn, queue, job_id)
                if outcome != Outcome.ABSENT:
                    print(f"{job_id} {outcome} {queue}")
                    break
            if outcome == Outcome.ABSENT:
                missing += 1
                where = ", ".join(named) if named else "any queue"
                print(f"echomq: {job_id}: no waiting or running job with this id on {where}",
                      file=sys.stderr)
    finally:
        app.close()
    return 1 if missing else 0


def _pause(args: argparse.Namespace, pause: bool) -> int:
    from echomq.verbs import jobs

    try:
        queues = [keyspace.validate_queue(q) for q in args.queues]
    except ValueError as exc:
        return _fail(str(exc))
    conn, app = connect(args)
    try:
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
    return _pause(args, True)


def run_resume(args: argparse.Namespace) -> int:
    return _pause(args, False)
