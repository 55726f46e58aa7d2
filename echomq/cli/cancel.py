"""``echomq cancel ID...``: cancel jobs.

``cancel`` removes a waiting job (pending, a group lane, scheduled) or asks a running one
to stop (its worker sees the request at its next lease checkpoint); it looks the id up on
``--queue`` (repeatable), else on the queues of ``--app``, else on every queue found on the
server (the queue registry first, then a scan). Exit status 1 when an id is on no queue
(nothing waiting or running with it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from echomq.cli.common import connect, fail, find_queue, url_flag
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


def run_cancel(args: argparse.Namespace) -> int:
    from echomq.core.outcomes import Outcome
    from echomq.verbs import flows

    try:
        named = [keyspace.validate_queue(q) for q in args.queue or []]
        for job_id in args.ids:
            if not job_id.startswith("JOB"):
                return fail(f"{job_id!r} is not a job id (job ids start with JOB)")
    except ValueError as exc:
        return fail(str(exc))
    declared: list[str] = []
    if args.app:
        from echomq.cli.worker import load_app

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
