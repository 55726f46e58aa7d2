"""``echomq enqueue TASK [ARG...]``: queue a task run now (``schedule``, its twin for
later, shares its arguments and its run).

Every command takes ``--url`` (default ``$ECHOMQ_URL``, else the embedded server). Task
arguments are given one per word: a word that parses as JSON is that value (``3``,
``true``, ``'{"a": 1}'``), anything else is a string.
"""

from __future__ import annotations

import argparse
from typing import Any

from echomq.cli.common import connect, parse_kwargs, url_flag, word_value


def register(sub: Any) -> None:
    p = sub.add_parser("enqueue", help="queue a task run now")
    task_args(p)
    p.set_defaults(func=run_enqueue)


def task_args(p: argparse.ArgumentParser) -> None:
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


def run_enqueue(args: argparse.Namespace) -> int:
    from echomq.core import ids, keyspace
    from echomq.core.payload import encode
    from echomq.verbs import jobs, registry

    kwargs = parse_kwargs(args.kwargs)
    name, queue = args.task, args.queue
    if args.app:
        from echomq.cli.worker import load_app

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
    elsewhere = [] if known else declared_elsewhere(conn, live, name, queue)
    if not known and not elsewhere:
        return  # nothing declared here yet (no worker ever served this queue)
    hints = []
    if elsewhere:
        where, full = elsewhere[0]
        hints.append(f"it is declared on queue {', '.join(repr(q) for q, _ in elsewhere)}"
                     f"{'' if full == name else f' as {full!r}'}: pass --queue {where}"
                     f"{'' if full == name else f' and the name {full}'}")
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


def declared_elsewhere(conn: Any, live: list[Any], name: str, queue: str
                       ) -> list[tuple[str, str]]:
    """``(queue, full name)`` for each other queue where a live worker or a recorded
    declaration knows ``name``, as written or as a short name (``send`` for
    ``shop.send``), sorted; read only when nothing is known on ``queue`` itself."""
    from echomq.verbs import declarations, registry

    found: set[tuple[str, str]] = set()
    tasks = {(q, t) for w in live for q, ts in w.tasks.items() for t in ts}
    for q in registry.names(conn):
        if q != queue:
            tasks |= {(q, t) for t in declarations.declared(conn, q)}
    for q, t in tasks:
        if q != queue and name in (t, t.rsplit(".", 1)[-1]):
            found.add((q, t))
    return sorted(found)
