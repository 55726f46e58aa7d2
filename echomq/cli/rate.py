"""``echomq rate QUEUE MAX/DURATION|none``: a queue-wide rate, at most MAX claims start in
any window of DURATION (read as ``echomq group rate`` reads it), counted on the SERVER
clock.
"""

from __future__ import annotations

import argparse
from typing import Any

from echomq.cli.common import url_flag
from echomq.cli.group import act_on, parse_rate, show_rate
from echomq.cli.known import check, force_flag


def register(sub: Any) -> None:
    p = sub.add_parser("rate", help="a queue-wide rate: at most MAX starts per DURATION")
    p.add_argument("queue", help="the queue")
    p.add_argument("rate", type=parse_rate, help="MAX/DURATION (10/1s, 600/1m), or none")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_queue_rate)


def run_queue_rate(args: argparse.Namespace) -> int:
    from echomq.verbs import jobs
    rate: tuple[int, int] | None = args.rate

    def act(conn: Any) -> None:
        check(conn, [args.queue], force=args.force)
        if rate is None:
            jobs.clear_rate(conn, args.queue)
        else:
            jobs.set_rate(conn, args.queue, *rate)

    act_on(args, act)
    print(f"queue {args.queue}: {'no rate' if rate is None else 'rate ' + show_rate(rate)}")
    return 0
