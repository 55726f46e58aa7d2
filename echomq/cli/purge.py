"""``echomq purge QUEUE --state dead|pending|scheduled|waiting --yes``: delete every job of the
queue in that state; without ``--yes`` it refuses (exit 2) before connecting.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from echomq.cli.common import connect, url_flag
from echomq.cli.known import check, force_flag
from echomq.core import keyspace


def register(sub: Any) -> None:
    p = sub.add_parser("purge", help="delete every job of a queue in one state (needs --yes)")
    p.add_argument("queue")
    p.add_argument("--state", required=True, choices=("dead", "pending", "scheduled", "waiting"),
                   help="which jobs to delete")
    p.add_argument("--yes", action="store_true", help="really delete them")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_purge)


def run_purge(args: argparse.Namespace) -> int:
    from echomq.verbs import purge

    queue = keyspace.validate_queue(args.queue)
    if not args.yes:
        print(f"echomq: purge deletes every {args.state} job of queue {queue!r} for good; "
              "run it again with --yes to do it (nothing was deleted)", file=sys.stderr)
        return 2
    conn, app = connect(args)
    try:
        check(conn, [queue], force=args.force)
        deleted = purge.purge(conn, queue, args.state)
    finally:
        app.close()
    print(f"purged {deleted} {args.state} jobs from {queue}")
    return 0
