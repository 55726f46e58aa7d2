"""``echomq worker myapp.tasks:app --queues a,b --concurrency 50``: run an app's tasks.

SIGTERM/SIGINT (or ``echomq workers stop ID``): stop claiming, let in-flight jobs (on every
queue) finish within ``--grace`` seconds, exit 0; a second signal, or the end of the grace,
abandons what is left to the reaper, and the worker names those job ids and exits 3.
``echomq workers quiet ID`` stops its claims and lets what runs finish; it stays up until
stopped. It is listed by ``echomq workers`` while it runs (``--heartbeat-ms``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from echomq.cli.common import (
    DefaultsFormatter,
    command_timeout,
    command_timeout_flag,
    default_url,
)
from echomq.runtime.beat import DEFAULT_BEAT_MS
from echomq.runtime.consumer import DEFAULT_CONCURRENCY
from echomq.tasks.worker import DEFAULT_GRACE_S
from echomq.verbs.workers import DEFAULT_HEARTBEAT_MS

ABANDONED = 3  # the exit code of a worker that left running jobs to the reaper


def register(sub: Any) -> None:
    p = sub.add_parser("worker", help="run an app's tasks (consumers, metronome, pump)",
                       formatter_class=DefaultsFormatter,
                       description="Run an app's tasks until SIGTERM/SIGINT (or, with "
                       "--burst, until nothing is left to run). Exit 0 after a clean drain, "
                       f"{ABANDONED} when running jobs were abandoned to the reaper.")
    p.add_argument("app", help="the App to run, as module:attribute (attribute default: app)")
    p.add_argument("--queues", default=None,
                   help="comma-separated queues (default: every queue the app's tasks use)")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                   help="jobs in flight per queue")
    p.add_argument("--beat-ms", type=int, default=DEFAULT_BEAT_MS,
                   help="the beat in ms: reap, promote and claim cadence")
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE_S,
                   help="seconds in-flight jobs get to finish on SIGTERM")
    p.add_argument("--burst", action="store_true",
                   help="run what is due, then exit (for cron-driven and CI runs)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a handler may run before its attempt fails with a "
                        "TimeoutError, for tasks declared without timeout= (default: off)")
    p.add_argument("--events", default=None, metavar="MODULE:FUNCTION",
                   help="an observer called with every runtime event (echomq.runtime.events.Event)")
    p.add_argument("--heartbeat-ms", type=int, default=DEFAULT_HEARTBEAT_MS,
                   help="how often the worker renews its entry in the live worker registry "
                        "(`echomq workers`); a killed worker drops out within two periods")
    p.add_argument("--wire", type=int, choices=(4, 6), default=None,
                   help="4: scripts; 6: the EMQ module's native commands (default: the app's "
                        "wire= if it names one, else 6 when every server node has the "
                        "module, else 4)")
    p.add_argument("--force", action="store_true",
                   help="serve --queues names even when no producer, worker, registration "
                        "or stored job has used them (a typo is refused without it)")
    p.add_argument("--no-metronome", action="store_true",
                   help="each consumer runs its own reap/promote legs (no pool election)")
    p.add_argument("--url", default=None,
                   help="server URL (default: $ECHOMQ_URL, else the embedded server)")
    command_timeout_flag(p)
    p.set_defaults(func=run)


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` (the current directory is importable) and return it."""
    from echomq.runtime.imports import import_from_cwd
    from echomq.tasks.app import App

    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise SystemExit(f"echomq: bad app {spec!r}: expected module:attribute")
    try:
        module = import_from_cwd(module_name)
    except ImportError as exc:
        if exc.name == module_name:
            raise SystemExit(f"echomq: cannot import {module_name!r}: no such module in "
                             f"{os.getcwd()} or on sys.path (run from your project's "
                             "directory)") from exc
        raise SystemExit(f"echomq: cannot import {module_name!r}: {exc}") from exc
    except (ValueError, TypeError) as exc:
        # a declaration refused at import (a bad cron expression, zone or task option)
        raise ValueError(f"{module_name}: {exc}") from exc
    app = getattr(module, attr or "app", None)
    if app is None and not hasattr(module, attr or "app"):
        apps = [f"{module_name}:{n}" for n, v in vars(module).items() if isinstance(v, App)]
        hint = f" (its App: {', '.join(apps)})" if apps else " (it defines no echomq.App)"
        raise SystemExit(f"echomq: module {module_name!r} has no attribute "
                         f"{attr or 'app'!r}{hint}")
    if not isinstance(app, App):
        raise SystemExit(f"echomq: {spec!r} is not an echomq.App (got {type(app).__name__})")
    return app


def run(args: argparse.Namespace) -> int:
    from echomq.tasks.worker import Worker, serve

    if not args.verbose and not args.log_level:
        logging.getLogger("echomq").setLevel(logging.INFO)
    app = load_app(args.app)
    url = default_url(args.url)
    if url:
        app.url = url
    # --command-timeout over the app's timeout=: the worker's connections use it too
    app.timeout = command_timeout(args) or app.timeout
    queues = [q.strip() for q in args.queues.split(",") if q.strip()] if args.queues else None
    if queues and not args.force:
        from echomq.cli.known import check

        check(app.connector(), queues, declared=app.queues())
    extra: dict[str, Any] = {}
    if args.events:
        from echomq.runtime.events import load_observer

        try:
            extra["on_event"] = load_observer(args.events)
        except ValueError as exc:
            raise SystemExit(f"echomq: --events: {exc}") from None
    if args.timeout is not None:
        if args.timeout <= 0:
            raise SystemExit("echomq: --timeout must be > 0 seconds")
        extra["timeout"] = args.timeout
    try:
        worker = serve(Worker(app, queues, concurrency=args.concurrency, beat_ms=args.beat_ms,
                              grace_s=args.grace, metronome=not args.no_metronome,
                              burst=args.burst, heartbeat_ms=args.heartbeat_ms,
                              name=args.app if ":" in args.app else f"{args.app}:app",
                              wire=args.wire, **extra))
    finally:
        app.close()
    if not worker.unfinished:
        return 0
    # a deploy that cut jobs short must not look clean: name them, exit non-zero
    print(f"echomq: abandoned {worker.unfinished} running jobs to the reaper (they run again "
          f"once their leases lapse): {', '.join(worker.abandoned)}", file=sys.stderr,
          flush=True)
    if threading.active_count() > 1:
        # a plain-function handler still running in its thread cannot be interrupted; its
        # lease lapses and the reaper returns the job, so leave without joining it
        logging.shutdown()
        sys.stdout.flush()
        os._exit(ABANDONED)
    return ABANDONED
