"""``echomq limit QUEUE N|none``: a queue-wide concurrency cap, at most N of the queue's
jobs active at once across every worker (live leases, counted by the claim on the SERVER
clock); ``none`` removes it. A task's ``queue_limit=`` applies the same cap at worker start.
"""

from __future__ import annotations

import argparse
from typing import Any

from echomq.cli.common import url_flag
from echomq.cli.group import act_on, parse_limit


def register(sub: Any) -> None:
    p = sub.add_parser("limit", help="a queue-wide cap: at most N jobs active at once")
    p.add_argument("queue", help="the queue")
    p.add_argument("limit", type=parse_limit, help="a whole number >= 1, or none")
    url_flag(p)
    p.set_defaults(func=run_queue_limit)


def run_queue_limit(args: argparse.Namespace) -> int:
    from echomq.verbs import jobs
    act_on(args, lambda conn: jobs.set_limit(conn, args.queue, args.limit))
    what = "no limit" if args.limit is None else f"at most {args.limit} active at once"
    print(f"queue {args.queue}: {what}")
    return 0
