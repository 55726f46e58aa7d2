"""``echomq batch ID``: a batch's progress (``app.batch(...)``): its members enrolled,
pending, completed and dead, whether its block closed, and which callbacks fired.
Exit status 1 when no batch has that id (never made, or expired a week after it ended).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echomq.cli.common import connect, url_flag


def register(sub: Any) -> None:
    p = sub.add_parser("batch", help="a batch's progress: pending, completed, dead, callbacks")
    p.add_argument("id", help="the batch id (app.batch(...).id)")
    p.add_argument("--json", action="store_true", help="print JSON")
    url_flag(p)
    p.set_defaults(func=run_batch)


def run_batch(args: argparse.Namespace) -> int:
    from echomq.verbs import batches

    batch_id = args.id.strip()
    conn, app = connect(args)
    try:
        info = batches.info(conn, batch_id)
        fired = batches.fired(conn, batch_id) if info is not None else []
    finally:
        app.close()
    if info is None:
        print(f"echomq: no batch {batch_id}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"id": batch_id, **info.as_dict(), "fired": fired}, indent=2))
        return 0
    cancelled = info.total - info.pending - info.completed - info.dead
    done = info.total - info.pending
    share = f" ({100 * done / info.total:.0f}%)" if info.total else ""
    print(f"batch {batch_id}: {done} of {info.total} ended{share}, "
          f"{'closed' if info.closed else 'open (its block runs)'}")
    print(f"  pending {info.pending}  completed {info.completed}  dead {info.dead}"
          + (f"  cancelled {cancelled}" if cancelled else ""))
    print(f"  callbacks fired: {', '.join(fired) if fired else 'none yet'}")
    return 0
