"""``echomq outbox relay --db URL``: admit the rows ``echomq.outbox.enqueue`` wrote into a
database (``sqlite:///PATH``, ``postgresql://...``), each exactly once, by its minted id
(``echomq.tasks.outbox``). Safe to kill at any point and to run several side by side on
PostgreSQL (a killed relay's batch is admitted again: ``duplicate``, nothing written)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from echomq.cli.common import connect, url_flag

log = logging.getLogger("echomq.outbox")


def register(sub: Any) -> None:
    p = sub.add_parser("outbox", help="the transactional outbox: relay its rows to the queues")
    words = p.add_subparsers(dest="outbox_command", required=True)
    r = words.add_parser("relay", help="admit the outbox's rows, each once")
    r.add_argument("--db", required=True,
                   help="the outbox database: sqlite:///PATH or postgresql://...")
    r.add_argument("--batch", type=int, default=100, help="rows per transaction (100)")
    r.add_argument("--once", action="store_true",
                   help="exit once the outbox is empty (default: keep relaying)")
    r.add_argument("--idle", type=float, default=0.5,
                   help="seconds to wait when the outbox is empty (0.5)")
    r.add_argument("--pace", type=float, default=0.0,
                   help="seconds between two admissions: a throttle (0)")
    url_flag(r)
    r.set_defaults(func=run_relay)


def run_relay(args: argparse.Namespace) -> int:
    from echomq.tasks import outbox

    if args.batch < 1:
        raise ValueError("--batch must be at least 1")
    db = outbox.connect(args.db)
    conn, app = connect(args)
    try:
        total = outbox.relay(
            db, conn, batch=args.batch, once=args.once, idle_s=args.idle, pace_s=args.pace,
            report=lambda got: log.info("relayed %d (%d already admitted)",
                                        got.admitted, got.duplicates))
    finally:
        app.close()
        db.close()
    print(f"relayed {total.admitted} admitted, {total.duplicates} already admitted")
    return 0
