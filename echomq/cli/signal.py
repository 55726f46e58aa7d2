"""``echomq signal KEY [--payload JSON]``: send a durable signal (``app.signal``).

Every job waiting for ``KEY`` (``current_job().wait_for(KEY)``), on any queue, resumes with
the payload (JSON; default ``null``) as that step's result; the signal is kept ``--ttl``
(default a day, SERVER clock) for the waits that begin after it. Prints how many jobs it
resumed (``--json``: ``{"key", "resumed"}``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from echomq.cli.common import default_url, fail, url_flag
from echomq.core import keyspace
from echomq.core.times import parse_duration


def register(sub: Any) -> None:
    p = sub.add_parser("signal", help="send a durable signal: resume the jobs waiting for "
                                      "KEY (current_job().wait_for)")
    p.add_argument("key", metavar="KEY", help="the signal key")
    p.add_argument("--payload", default="null",
                   help="the signal's payload, JSON (default: null)")
    p.add_argument("--ttl", default=None, type=parse_duration,
                   help="keep the signal this long for later waits (e.g. 1h; default 1d)")
    p.add_argument("--json", action="store_true", help="print {key, resumed} as JSON")
    url_flag(p)
    p.set_defaults(func=run_signal)


def run_signal(args: argparse.Namespace) -> int:
    from echomq.tasks.app import App

    try:
        keyspace.signal_key(args.key, "value")  # the key's rules, before any I/O
        payload = json.loads(args.payload)
        ttl_s = None if args.ttl is None else args.ttl / 1000
    except json.JSONDecodeError as exc:
        return fail(f"--payload is not JSON ({exc.msg}): pass e.g. --payload '{{\"ok\": true}}'")
    except ValueError as exc:
        return fail(str(exc))
    app = App(default_url(args.url)) if ttl_s is None else App(default_url(args.url),
                                                                 signal_ttl=ttl_s)
    try:
        resumed = app.signal(args.key, payload)
    finally:
        app.close()
    if args.json:
        print(json.dumps({"key": args.key, "resumed": resumed}))
    else:
        print(f"{args.key}: {resumed} job{'' if resumed == 1 else 's'} resumed")
    return 0
