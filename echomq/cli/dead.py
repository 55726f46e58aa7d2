"""``echomq dead list|retry``: the dead-letter set, listed or sent back to pending.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echomq.cli.common import connect, find_queue, job_id_arg, scan_queues, url_flag
from echomq.core import readings


def register(sub: Any) -> None:
    dead = sub.add_parser("dead", help="the dead-letter set: list, retry")
    dsub = dead.add_subparsers(dest="dead_command", metavar="ACTION", required=True)
    p = dsub.add_parser("list", help="list dead jobs, most recent first (every queue)")
    p.add_argument("--queue", default=None, help="only this queue")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true", help="print JSON lines")
    url_flag(p)
    p.set_defaults(func=run_dead_list)
    p = dsub.add_parser("retry", help="send dead jobs back to pending (fresh attempts)")
    p.add_argument("ids", nargs="*", help="job ids (or --all)")
    p.add_argument("--all", action="store_true",
                   help="every dead job (of --queue, else of every queue)")
    p.add_argument("--queue", default=None, help="the queue (default: found per id)")
    url_flag(p)
    p.set_defaults(func=run_dead_retry)


def run_dead_list(args: argparse.Namespace) -> int:
    from echomq.core.tally import Tally
    from echomq.verbs import dead
    conn, app = connect(args)
    try:
        queues = [args.queue] if args.queue else scan_queues(conn)
        rows = [{"queue": q, **row} for q in queues
                for row in dead.list_dead(conn, q, 0, args.limit)]
    finally:
        app.close()
    rows.sort(key=lambda r: r["died_at"], reverse=True)  # newest first across queues
    rows = rows[:args.limit]
    for row in rows:
        died = readings.instant(row["died_at"]).isoformat(timespec="milliseconds")
        if args.json:
            out = {k: v for k, v in row.items() if k != "payload"}
            out["payload"] = (row["payload"] or b"").decode(errors="replace")
            out["task"] = _task_of(row["payload"])
            print(json.dumps(out))
        else:
            counts = Tally(row["runs"], row["failures"], row["delays"]).text()
            print(f"{row['id']}  {row['queue']}  {_task_of(row['payload']) or '?'}  "
                  f"died {died}  {counts}  {row['error'] or ''}")
    if not rows and not args.json:
        where = f"queue {args.queue!r}" if args.queue else f"any of {len(queues)} queues"
        print(f"(no dead jobs on {where})")
    return 0


def _task_of(payload: bytes | None) -> str | None:
    from echomq.core.payload import decode

    try:
        return decode(payload or b"")[0]
    except ValueError:
        return None


def run_dead_retry(args: argparse.Namespace) -> int:
    from echomq.cli.common import plain
    from echomq.core import errors
    from echomq.verbs import dead

    if not args.ids and not args.all:
        raise ValueError("give job ids, or --all for every dead job")
    for job_id in args.ids:
        job_id_arg(job_id)
    conn, app = connect(args)
    failed = 0
    try:
        if args.all:
            queues = [args.queue] if args.queue else scan_queues(conn)
            grand = 0
            for q in queues:
                total = 0
                while True:
                    n = dead.revive_all(conn, q, 500)
                    total += n
                    if n == 0:
                        break
                    if total >= 500:
                        print(f"\rrevived {total}...", end="", file=sys.stderr, flush=True)
                grand += total
                if total or args.queue:
                    print(f"revived {total} jobs on {q}")
            if not grand and not args.queue:
                print(f"revived 0 jobs (no dead jobs on any of {len(queues)} queues)")
        else:
            for job_id in args.ids:
                queue = args.queue or find_queue(conn, job_id)
                if queue is None:
                    failed += 1
                    print(f"echomq: {job_id} not revived: no such job on any queue",
                          file=sys.stderr)
                    continue
                try:
                    dead.revive(conn, queue, job_id)
                    print(f"{job_id} revived on {queue}")
                except errors.ServerError as exc:
                    failed += 1
                    detail = f" [{exc}]" if args.verbose else ""
                    print(f"echomq: {job_id} not revived: {plain(exc, job_id)}{detail}",
                          file=sys.stderr)
    finally:
        app.close()
    return 1 if failed else 0
