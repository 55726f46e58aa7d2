"""``echomq jobs QUEUE [--state S] [--limit N] [--json]``: list a queue's jobs.

Without ``--state`` every state is listed in the order a job moves through them (pending,
scheduled, active, waiting, then the ended ones, newest first), at most ``--limit`` rows in
all. The time column is the state's set score (``verbs.jobs.page``): the run-at of a
scheduled job, the lease expiry of an active one, when an ended one ended (SERVER clock).
An unknown queue name is refused as ``pause`` refuses it (``cli.known``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from echomq.cli.common import connect, url_flag
from echomq.cli.known import check, force_flag

#: the listing order without --state: where jobs wait first, then where they ended
ORDER = ("pending", "scheduled", "active", "waiting", "dead", "expired", "cancelled",
         "completed")


def register(sub: Any) -> None:
    p = sub.add_parser("jobs", help="list a queue's jobs (id, state, runs, task, when, error)")
    p.add_argument("queue")
    p.add_argument("--state", choices=ORDER, default=None,
                   help="only jobs in this state (default: every state)")
    p.add_argument("--limit", type=_limit, default=50, help="at most N rows")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_jobs)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--limit must be at least 1, got {value}")
    return value


def run_jobs(args: argparse.Namespace) -> int:
    from echomq.core import keyspace
    from echomq.verbs import jobs

    queue = keyspace.validate_queue(args.queue)
    rows: list[dict[str, Any]] = []
    conn, app = connect(args)
    try:
        check(conn, [queue], force=args.force)
        for state in (args.state,) if args.state else ORDER:
            left = args.limit - len(rows)
            if left <= 0:
                break
            for row in jobs.page(conn, queue, state, 0, left):
                rows.append({**row, "state": row.get("state") or state})
    finally:
        app.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"(no {args.state + ' ' if args.state else ''}jobs on {queue})")
        return 0
    width = max([len(row["task"] or "-") for row in rows] + [4])
    print(f"{'id':<30} {'state':<10} {'runs':>4}  {'task':<{width}}  {'when (UTC)':<23}  error")
    for row in rows:
        print(f"{row['id']:<30} {row['state']:<10} {row['attempts'] or 0:>4}  "
              f"{row['task'] or '-':<{width}}  {_when(row['score']):<23}  {row['error'] or '-'}")
    return 0


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]
