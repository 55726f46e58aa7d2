"""Job commands: ``echomq enqueue``, ``schedule``, ``job``, ``stats``, ``dead list|retry``.

Every command takes ``--url`` (default ``$ECHOMQ_URL``, else the embedded server). Task
arguments are given one per word: a word that parses as JSON is that value (``3``,
``true``, ``'{"a": 1}'``), anything else is a string.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from echomq.cli.common import connect, find_queue, parse_kwargs, scan_queues, url_flag, word_value
from echomq.core import readings
from echomq.core.times import parse_duration, parse_instant


def _task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="the task name (with --app, a short name is enough)")
    p.add_argument("args", nargs="*", help="positional arguments (JSON, else a string)")
    p.add_argument("--kwargs", default=None, help="keyword arguments as a JSON object")
    p.add_argument("--queue", default=None, help="the queue (default: the task's, or default)")
    p.add_argument("--app", default=None,
                   help="module:attribute of the App: the task's queue, and its arguments "
                        "checked against the function (a mismatch queues nothing)")
    p.add_argument("--id", default=None, help="the job id (default: a fresh JOB id)")
    p.add_argument("--priority", type=int, default=0,
                   help="0..1000000, lower runs first (default 0)")
    p.add_argument("--group", default=None, help="the group lane the job waits in")
    p.add_argument("--unique", default=None, metavar="KEY",
                   help="a unique key: while its owner waits or runs, print the owner's id "
                        "and write nothing")
    p.add_argument("--force", action="store_true",
                   help="queue the task even when no live worker or declared app knows its "
                        "name on the queue (without --app the name is checked)")
    url_flag(p)


def register(sub: Any) -> None:
    p = sub.add_parser("enqueue", help="queue a task run now")
    _task_args(p)
    p.set_defaults(func=run_enqueue)

    p = sub.add_parser("schedule", help="queue a task run later (--in 5s or --at ISO)")
    _task_args(p)
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--in", dest="in_ms", type=parse_duration, help="delay, e.g. 5s, 2m")
    when.add_argument("--at", dest="at_ms", type=parse_instant, help="ISO-8601 or epoch ms")
    p.set_defaults(func=run_enqueue)

    p = sub.add_parser("job", help="show a job's status (found on any queue)")
    p.add_argument("id")
    p.add_argument("--queue", default=None, help="only look on this queue")
    p.add_argument("--json", action="store_true",
                   help="print JSON: state, task, args, kwargs, result, error, attempts")
    url_flag(p)
    p.set_defaults(func=run_job)

    p = sub.add_parser("stats", help="job counts per state per queue (completed: every "
                       "job completed, kept or not, from the server's counters) and the "
                       "last minute's throughput")
    p.add_argument("--queue", action="append", default=None, help="only this queue (repeatable)")
    p.add_argument("--app", default=None,
                   help="module:attribute of an App: list its queues even when empty")
    p.add_argument("--json", action="store_true", help="print JSON")
    url_flag(p)
    p.set_defaults(func=run_stats)

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


def run_enqueue(args: argparse.Namespace) -> int:
    from echomq.core import ids, keyspace
    from echomq.core.payload import encode
    from echomq.verbs import jobs, registry

    kwargs = parse_kwargs(args.kwargs)
    name, queue = args.task, args.queue
    if args.app:
        from echomq.cli.workercmds import load_app

        target = load_app(args.app)
        task = target.tasks.get(name) or next(
            (t for n, t in target.tasks.items() if n.rsplit(".", 1)[-1] == name), None)
        if task is None:
            known = ", ".join(sorted(target.tasks)) or "none"
            raise ValueError(f"{args.app} has no task named {name!r} "
                             f"(its tasks: {known}); nothing was queued")
        # a partitioned task's job goes to one of its partitions, as Task.enqueue does
        name, queue = task.name, queue or task.target_queue()
        # the arguments must fit the function, as Task.enqueue checks (nothing is sent)
        task.check([word_value(a) for a in args.args], kwargs)
    queue = queue or "default"
    keyspace.validate_queue(queue)  # bad arguments raise here, before any connection
    payload = encode(name, [word_value(a) for a in args.args], kwargs)
    job_id = args.id or ids.mint()
    if not job_id.startswith("JOB"):
        raise ValueError(f"--id {job_id!r} is not a job id: ids start with JOB "
                         "(leave --id out for a fresh one)")
    opts: dict[str, Any] = {}  # a bad option raises ValueError here: exit 2, nothing sent
    if args.priority:
        from echomq.core import guards

        opts["priority"] = guards.priority(args.priority)
    if args.group is not None:
        opts["group"] = keyspace.validate_queue(args.group)
    if args.unique is not None:
        from echomq.core.options import check_unique

        check_unique(args.unique)
    conn, app = connect(args)
    try:
        if not args.app and not args.force:
            check_task(conn, name, queue)  # refused: nothing written
        if args.unique is not None:
            mode, value = (("in", args.in_ms) if getattr(args, "in_ms", None) is not None
                           else ("at", args.at_ms) if getattr(args, "at_ms", None) is not None
                           else ("now", 0))
            admitted = jobs.admit(conn, queue, job_id, payload, mode=mode, value=value,
                                  unique=args.unique, **opts)
            outcome, job_id = admitted.outcome, admitted.id
        elif getattr(args, "in_ms", None) is not None:
            outcome = jobs.enqueue_in(conn, queue, job_id, payload, args.in_ms, **opts)
        elif getattr(args, "at_ms", None) is not None:
            outcome = jobs.enqueue_at(conn, queue, job_id, payload, args.at_ms, **opts)
        else:
            outcome = jobs.enqueue(conn, queue, job_id, payload, **opts)
        registry.note(conn, queue)  # once admitted: a refused enqueue writes nothing
    finally:
        app.close()
    print(f"{job_id} {outcome} {queue}")
    return 0 if outcome != "duplicate" else 1


class UnknownTaskName(LookupError):
    """``echomq enqueue`` of a task name nothing declares on the queue (exit 2)."""


def check_task(conn: Any, name: str, queue: str) -> None:
    """Refuse ``name`` on ``queue`` when tasks are known there (the live workers' apps
    declare them, or a worker recorded them: ``verbs.declarations``) and it is not one of
    them: a typo would wait for ever, served by nothing. A queue where nothing is known
    (no worker ever started on it) is not checked."""
    import difflib

    from echomq.verbs import declarations, workers

    live = workers.live(conn)
    known = {t for w in live for t in w.tasks.get(queue, ())}
    known |= set(declarations.declared(conn, queue))
    if name in known:
        return
    elsewhere = sorted({q for w in live for q, ts in w.tasks.items() if name in ts})
    if not known and not elsewhere:
        return  # nothing declared here yet (no worker ever served this queue)
    hints = []
    if elsewhere:
        hints.append(f"it is declared on queue {', '.join(map(repr, elsewhere))}: "
                     f"pass --queue {elsewhere[0]}")
    else:
        close = (sorted(k for k in known if k.rsplit(".", 1)[-1] == name)
                 or difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6))
        if close:
            hints.append(f"did you mean {' or '.join(map(repr, close))}?")
    hint = f" ({'; '.join(hints)})" if hints else ""
    listed = "\n".join(f"  {k}" for k in sorted(known)) or "  (none)"
    raise UnknownTaskName(
        f"unknown task {name!r} on queue {queue!r}: no live worker or declared app knows "
        f"it{hint}; nothing was queued (--force queues it anyway).\n"
        f"known tasks on {queue!r}:\n{listed}")


def _job_id(text: str) -> str:
    if not text.startswith("JOB"):
        raise ValueError(f"{text!r} is not a job id (ids look like JOB01H...)")
    return text


def run_job(args: argparse.Namespace) -> int:
    job_id = _job_id(args.id)
    conn, app = connect(args)
    try:
        queue = args.queue or find_queue(conn, job_id)
        info = app.job(job_id, queue=queue) if queue else None
        flow = (_flow_lines(conn, queue, job_id, info.state)
                if info is not None and queue and info.row else [])
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
    for note in info.notes:  # what another client left in the row, shown, not raised
        print(f"note      {note}")
    return 0


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


def run_stats(args: argparse.Namespace) -> int:
    from echomq.cli.groupcmds import totals as group_totals
    from echomq.core import partitions
    from echomq.verbs import flows, jobs, metrics

    declared: list[str] = []
    if args.app:
        from echomq.cli.workercmds import load_app

        declared = load_app(args.app).queues()
    conn, app = connect(args)
    try:
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
    from echomq.cli.main import plain
    from echomq.core import errors
    from echomq.verbs import dead

    if not args.ids and not args.all:
        raise ValueError("give job ids, or --all for every dead job")
    for job_id in args.ids:
        _job_id(job_id)
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
