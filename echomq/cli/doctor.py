"""``echomq doctor [QUEUE...] [--fix]``: check live queues' invariants (``verbs.doctor``).

Each finding is one line (``queue  kind  subject: what is wrong``); with ``--fix`` the
repair follows it (``  repaired: ...``). Without a queue, every queue found on the server
is checked. Exit status 0 when every invariant holds, 1 when anything was found (repaired
or not: run it again to see the queue clean).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from echomq.cli.common import connect, scan_queues, url_flag
from echomq.core import keyspace


def register(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check queues' invariants (every job in the set its "
                                      "state names, group counts, the ring, flow parents); "
                                      "--fix repairs")
    p.add_argument("queues", nargs="*", metavar="QUEUE", help="queues (default: every queue)")
    p.add_argument("--fix", action="store_true", help="repair each finding, printing how")
    p.add_argument("--batch", type=int, default=200,
                   help="keys or subjects per round trip (each call stays this small)")
    p.add_argument("--json", action="store_true", help="print one JSON object per finding")
    url_flag(p)
    p.set_defaults(func=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    from echomq.verbs import doctor

    for q in args.queues:
        keyspace.validate_queue(q)
    if args.batch < 1:
        raise ValueError(f"--batch must be >= 1, got {args.batch}")
    conn, app = connect(args)
    try:
        queues = args.queues or scan_queues(conn)
        total = repaired = 0
        for q in queues:
            for f in doctor.check(conn, q, fix=args.fix, batch=args.batch):
                total += 1
                repaired += bool(f.repaired)
                if args.json:
                    print(json.dumps({"queue": f.queue, "kind": f.kind, "subject": f.subject,
                                      "detail": f.detail, "repaired": f.repaired or None}))
                    continue
                print(f"{f.queue}  {f.kind}  {f.subject}: {f.detail}")
                if f.repaired:
                    print(f"  repaired: {f.repaired}")
    finally:
        app.close()
    if not args.json:
        where = ", ".join(queues) if len(queues) <= 3 else f"{len(queues)} queues"
        if total == 0:
            print(f"{where or 'no queues'}: every invariant holds")
        else:
            fixed = f", {repaired} repaired" if args.fix else " (--fix repairs what it can)"
            print(f"{total} finding{'s' if total != 1 else ''}{fixed}")
    return 1 if total else 0
