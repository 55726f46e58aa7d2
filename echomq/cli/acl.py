"""``echomq acl --role producer|worker|dashboard --queues a,b``: print the ``ACL SETUSER``
command that gives a Valkey user exactly what the role needs on those queues
(``echomq.core.acl`` says what each role gets and why).

The line is for ``valkey-cli`` (or any client's ``ACL SETUSER``); nothing is sent to a
server. ``--password`` sets the user's password; without it one is made up and printed on
stderr. ``--json`` prints ``{"user", "password", "args"}`` (the command's arguments).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("acl", help="print the ACL SETUSER rules a producer, worker or "
                                   "dashboard user needs on some queues")
    p.add_argument("--role", required=True, choices=("producer", "worker", "dashboard"))
    p.add_argument("--queues", required=True, metavar="A,B",
                   help="the queues (comma-separated; a partitioned queue by its name)")
    p.add_argument("--user", default=None, help="the user name (default: echomq-ROLE)")
    p.add_argument("--password", default=None,
                   help="the user's password (default: a new random one, shown on stderr)")
    p.add_argument("--wire", type=int, choices=(4, 6), default=4,
                   help="6: also the native module's EMQ.* commands (the server must have "
                        "the module loaded, or it refuses the rule)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_acl)


def run_acl(args: argparse.Namespace) -> int:
    from echomq.core import acl

    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    user = args.user or f"echomq-{args.role}"
    password = args.password or secrets.token_urlsafe(24)
    command = acl.setuser(user, password, args.role, queues, args.wire)
    if args.json:
        print(json.dumps({"user": user, "password": password, "args": command}))
        return 0
    print(acl.quoted(command))
    if args.password is None:
        print(f"echomq: password for {user}: {password} (pass --password to choose one)",
              file=sys.stderr)
    return 0
