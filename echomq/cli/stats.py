"""``echomq stats``: job counts per state per queue and the last minute's throughput.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from echomq.cli.common import connect, scan_queues, url_flag
from echomq.cli.known import check, force_flag


def register(sub: Any) -> None:
    p = sub.add_parser("stats", help="job counts per state per queue (completed: every "
                       "job completed, kept or not, from the server's counters) and the "
                       "last minute's throughput")
    p.add_argument("--queue", action="append", default=None, help="only this queue (repeatable)")
    p.add_argument("--app", default=None,
                   help="module:attribute of an App: list its queues even when empty")
    p.add_argument("--json", action="store_true", help="print JSON")
    force_flag(p)
    url_flag(p)
    p.set_defaults(func=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    from echomq.cli.group import totals as group_totals
    from echomq.core import partitions
    from echomq.verbs import flows, jobs, metrics

    declared: list[str] = []
    if args.app:
        from echomq.cli.worker import load_app

        declared = load_app(args.app).queues()
    conn, app = connect(args)
    try:
        if args.queue:
            check(conn, args.queue, force=args.force, declared=declared)
        queues = args.queue or scan_queues(conn, declared=declared)
        table: dict[str, dict[str, Any]] = {}
        grouped: dict[str, dict[str, int]] = {}
        paused: set[str] = set()
        # the server's counters: completed rows are deleted on ack by default, so the
        # completed set alone reads 0 right after jobs completed
        totals: dict[str, tuple[int, int, float, float]] = {}
        # a partitioned queue (mail#0 ... mail#7) is one row: its partitions' counts summed
        for base, members in partitions.fold(queues).items():
            table[base] = partitions.sum_counts(jobs.counts(conn, q) for q in members)
            counters = [jobs.stats(conn, q) for q in members]
            corrupt = sum(c.get("corrupt", 0) for c in counters)
            if corrupt:  # rows a claim could not run: dead with the reason, counted apart
                table[base]["corrupt"] = corrupt
            recent = [metrics.last_minute(conn, q) for q in members]
            done = sum(c["completed"] for c in counters)
            failed = sum(c["failed"] for c in counters)
            table[base]["completed"] = max(table[base].get("completed", 0), done)
            if done or failed:
                totals[base] = (done, failed, sum(r[0] for r in recent),
                                sum(r[1] for r in recent))
            if members != [base]:
                table[base]["partitions"] = len(members)
            if any(jobs.is_paused(conn, q) for q in members):
                paused.add(base)
            found = [t for q in members if (t := group_totals(conn, q)) is not None]
            if found:
                grouped[base] = {k: sum(t[k] for t in found) for k in found[0]}
            parents = sum(flows.waiting(conn, q) for q in members)
            if parents:  # flow parents sit on no state set above: say they are there
                table[base]["waiting-children"] = parents
    finally:
        app.close()
    if args.json:
        for q, t in grouped.items():
            table[q]["groups"] = t
        print(json.dumps(table, indent=2, sort_keys=True))
        return 0
    cols = list(jobs.STATE_SETS)
    labels = {q: f"{q} [{c['partitions']}]" if "partitions" in c else q
              for q, c in table.items()}
    width = max([5, *(len(label) for label in labels.values())])
    print(f"{'queue':<{width}}  " + "  ".join(f"{c:>9}" for c in cols) + "  status")
    for q, counts in table.items():
        print(f"{labels[q]:<{width}}  " + "  ".join(f"{counts.get(c, 0):>9}" for c in cols)
              + ("  paused" if q in paused else "  running"))
    if not queues:
        print("(no queues)")
    if queues:
        print("completed: every job completed, kept or not (the server's counters; the "
              "dashboard's 'completed (all)'; its 'completed (kept)' counts retained rows)")
    for q, (done, failed, done_min, failed_min) in totals.items():
        print(f"{q}: {done:,} completed and {failed:,} failed attempts in all (server "
              f"counters); last minute: {done_min:,.0f} completed, {failed_min:,.0f} failed")
    for q, counts in table.items():
        if counts.get("expired"):  # a sparse state: a line under the table, as flow parents
            print(f"{q}: {counts['expired']} expired (not started by their deadline; "
                  f"echomq job ID shows one)")
        if counts.get("waiting-children"):
            print(f"{q}: {counts['waiting-children']} flow parents waiting for their children "
                  "(echomq job ID shows a parent's tree)")
    for q, counts in table.items():
        if counts.get("corrupt"):
            n = counts["corrupt"]
            print(f"{q}: {n} corrupt row{'s' if n != 1 else ''} ended dead with the reason "
                  f"(echomq dead list --queue {q}; echomq doctor {q} checks the rest)")
    for q, t in grouped.items():
        # grouped jobs wait in their lanes, not in pending: say how many, and where to look
        print(f"{q}: {t['groups']} groups, {t['waiting']} waiting in their lanes, "
              f"{t['active']} active, {t['paused']} paused (echomq group list --queue {q})")
    return 0
