"""``echomq why JOB``: what holds a job that is not running, and when it lets go.

One read-only script on the SERVER clock (``jobs.why``): the job's run-at, a queue or group
pause, a group at its limit, a full rate window, the jobs ahead of it, a flow parent's
children; a deadline is named too. A running job says so (with its lease), an ended one
its end. Exit status 1 when no queue knows the id.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echomq.cli.common import connect, find_queue, url_flag


def register(sub: Any) -> None:
    p = sub.add_parser("why", help="why a job waits: the control that holds it and when it "
                                   "lets go")
    p.add_argument("id", help="the job id")
    p.add_argument("--queue", default=None, help="only look on this queue")
    p.add_argument("--json", action="store_true", help="print JSON (the control and its facts)")
    url_flag(p)
    p.set_defaults(func=run_why)


def run_why(args: argparse.Namespace) -> int:
    from echomq.core import keyspace
    from echomq.verbs import jobs

    job_id = args.id.strip()
    if not job_id.startswith("JOB"):
        raise ValueError(f"{args.id!r} is not a job id (ids look like JOB01H...)")
    if args.queue:
        keyspace.validate_queue(args.queue)
    conn, app = connect(args)
    try:
        queue = args.queue or find_queue(conn, job_id)
        hold = jobs.why(conn, queue, job_id) if queue else None
    finally:
        app.close()
    if hold is None or hold.state is None:
        where = f"on queue {args.queue!r}" if args.queue else "on any queue"
        print(f"echomq: no job {job_id} {where}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"id": job_id, "queue": queue, "state": hold.state,
                          "control": hold.control, "facts": hold.facts,
                          "until_ms": hold.until_ms, "expires_ms": hold.expires_ms,
                          "now_ms": hold.now_ms, "why": _line(hold)}, indent=2))
        return 0
    print(f"{job_id} {_line(hold)}")
    return 0


def _line(hold: Any) -> str:
    from echomq.verbs.jobs.holds import span

    if hold.words is not None:
        return str(hold.words)
    if hold.state == "active":
        if hold.lease_ms is None:
            return "running"
        return f"running (its lease runs {span(hold.lease_ms - hold.now_ms)} more)"
    return f"not waiting: it is {hold.state}"
