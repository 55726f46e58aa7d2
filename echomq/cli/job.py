"""``echomq job ID``: a job's status, found on any queue (``--json`` for tools), with the
last failure's traceback (``--json``: ``traceback`` and ``errors``, the last failures).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from echomq.cli.common import connect, find_queue, job_id_arg, url_flag


def register(sub: Any) -> None:
    p = sub.add_parser("job", help="show a job's status (found on any queue)")
    p.add_argument("id")
    p.add_argument("--queue", default=None, help="only look on this queue")
    p.add_argument("--json", action="store_true",
                   help="print JSON: state, task, args, kwargs, result, error, attempts, "
                        "traceback, errors (the last failures)")
    url_flag(p)
    p.set_defaults(func=run_job)


def run_job(args: argparse.Namespace) -> int:
    job_id = job_id_arg(args.id)
    conn, app = connect(args)
    try:
        queue = args.queue or find_queue(conn, job_id)
        info = app.job(job_id, queue=queue) if queue else None
        flow = (_flow_lines(conn, queue, job_id, info.state)
                if info is not None and queue and info.row else [])
        page = page_link(conn, job_id) if info is not None and not args.json else None
    finally:
        app.close()
    if info is None:
        where = f"on queue {args.queue!r}" if args.queue else "on any queue"
        print(f"echomq: no job {job_id} {where} (never queued, or completed and deleted: "
              "completed jobs are not kept unless the app's retention keeps them)",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(job_json(info), indent=2, default=str))
        return 0
    print(f"id        {info.id}\nqueue     {info.queue}\nstate     {info.state}\n"
          f"task      {info.task or '-'}\nruns      {info.runs} {info.tally.detail()}\n"
          f"error     {info.error or '-'}\n"
          f"run at    {info.run_at.isoformat() if info.run_at else '-'}")
    extra = [("priority", info.priority if info.priority else None), ("group", info.group),
             ("progress", _shown(info.progress)), ("result", _shown(info.result)),
             ("cancel", "requested" if info.cancel_requested else None),
             ("deadline", _instant(info.expires_ms)), ("expired", _instant(info.expired_at_ms)),
             ("waiting", info.waiting_on)]
    for label, value in extra:
        if value is not None:
            print(f"{label:<9} {value}")
    for line in flow:
        print(line)
    for i, step in enumerate(info.steps, 1):  # a durable job's steps, in order
        print(f"{'steps' if i == 1 else '':<9} {i}. {step['name']}  {step['state']}  "
              f"{_instant(step['at_ms']) or '-'}")
    for note in info.notes:  # what another client left in the row, shown, not raised
        print(f"note      {note}")
    print_failures(info)
    if page:
        print(f"page      {page}")
    return 0


def print_failures(info: Any) -> None:
    """The failure history's size and the last failure's traceback, indented below."""
    if info.errors:
        print(f"failures  the last {len(info.errors)} kept, with their tracebacks (--json)")
    if info.traceback:
        print("traceback (the last failure's):")
        for line in info.traceback.splitlines():
            print(f"  {line}")


def page_link(conn: Any, job_id: str) -> str | None:
    """The job's dashboard page when a dashboard runs (it announces its URL while it
    serves: ``verbs.dashboards``); ``None`` when none does or the read is refused."""
    from echomq.core import errors
    from echomq.verbs import dashboards

    try:
        running = dashboards.live(conn)
    except errors.EchoMQError:
        return None
    return f"{running[0]}/job/{job_id}" if running else None


def job_json(info: Any) -> dict[str, Any]:
    """``echomq job ID --json``: the job's status with its call (task, args, kwargs), its
    kept result, its last error and what its row records of its attempts (claims,
    failures, self-delays, stalls and when it ended; SERVER ms)."""
    row = info.row

    def ms(name: str) -> int | None:
        value = row.get(name)
        try:
            return int(value) if value not in (None, "") else None
        except ValueError:
            return None

    return {
        "id": info.id, "queue": info.queue, "state": info.state, "task": info.task,
        "args": info.args, "kwargs": info.kwargs, "result": info.result,
        "error": info.error, "attempts": info.attempts, "priority": info.priority,
        "group": info.group, "progress": info.progress, "run_at_ms": info.run_at_ms,
        "cancel_requested": info.cancel_requested,
        "expires_ms": info.expires_ms, "expired_at_ms": info.expired_at_ms,
        "traceback": info.traceback, "errors": info.errors,
        "steps": info.steps,
        "history": {
            "claims": info.attempts, "failures": info.failures, "delays": info.delays,
            "stalled": info.stalled, "last_error": info.error,
            "completed_at_ms": info.completed_at_ms, "died_at_ms": info.died_at_ms,
            "cancelled_at_ms": ms("cancelled_at"),
        },
    }


def _instant(ms: int | None) -> str | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(
        timespec="milliseconds")


def _shown(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _flow_lines(conn: Any, queue: str, job_id: str, state: str) -> list[str]:
    from echomq.cli.flowview import show
    from echomq.verbs import jobs

    return show(conn, queue, job_id, jobs.get(conn, queue, job_id), state)
