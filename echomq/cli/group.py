"""``echomq group list|pause|resume|limit|rate|weight``: groups, tenants' lanes (``echomq rate``
sets a queue-wide rate with the same reading, ``parse_rate``).

A group is a tenant's lane in a queue (``task.options(group=...)``, ``@app.task(group=...)``):
groups take turns at the claim, each may be paused, capped at a concurrency limit and rate
limited. A rate is ``MAX/DURATION``: at most MAX claims start in any window of DURATION
(``10/1s``, ``600/1m``, ``5/250ms``; ``10/s`` is ``10/1s``), counted on the SERVER clock;
``none`` removes it. Every command takes ``--url`` (default ``$ECHOMQ_URL``, else the
embedded server).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from echomq.cli.common import connect, scan_queues, until_ms, until_type, url_flag
from echomq.core import rates


def register(sub: Any) -> None:
    group = sub.add_parser("group", help="groups (tenants' lanes): list, pause, resume, "
                                         "limit, rate")
    gsub = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)

    p = gsub.add_parser("list", help="each group: waiting, active, limit, rate, paused")
    p.add_argument("--queue", action="append", default=None,
                   help="only this queue (repeatable; default: every queue)")
    p.add_argument("--json", action="store_true", help="print JSON")
    url_flag(p)
    p.set_defaults(func=run_list)

    p = gsub.add_parser("pause", help="release none of a group's jobs until resumed (or --until)")
    _queue_group(p)
    p.add_argument("--until", type=until_type, default=None, metavar="T",
                   help="resume by itself at T: an ISO-8601 instant, epoch ms, or a duration "
                        "from the server's now (30m, 2h)")
    p.set_defaults(func=run_pause)
    p = gsub.add_parser("resume", help="let a paused group's jobs run again")
    _queue_group(p)
    p.set_defaults(func=run_resume)

    p = gsub.add_parser("limit", help="at most N of a group's jobs at once (or none)")
    _queue_group(p)
    p.add_argument("limit", type=parse_limit, help="a whole number >= 1, or none")
    p.set_defaults(func=run_limit)

    p = gsub.add_parser("rate", help="at most MAX of a group's jobs start per DURATION")
    _queue_group(p)
    p.add_argument("rate", type=parse_rate, help="MAX/DURATION (10/1s, 600/1m), or none")
    p.set_defaults(func=run_group_rate)

    p = gsub.add_parser("weight", help="a group's turns in the ring per round (default 1)")
    _queue_group(p)
    p.add_argument("weight", type=parse_weight, help="a whole number >= 1")
    p.set_defaults(func=run_group_weight)


def parse_rate(text: str) -> tuple[int, int] | None:
    """``"10/1s"`` -> ``(10, 1000)``: at most 10 starts per 1,000 ms; ``"none"`` -> ``None``.
    A bare unit counts one of it (``10/s``); the reading is ``echomq.core.rates.parse``."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return rates.parse(text)
    except ValueError as exc:
        hint = "" if "never start" in str(exc) else " ('none' removes the rate)"
        raise argparse.ArgumentTypeError(f"{exc}{hint}") from None


def parse_limit(text: str) -> int | None:
    """A group's concurrency limit: a whole number >= 1, or ``none`` (no limit)."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a limit: {text!r} (a whole number of jobs at once, e.g. 5, or 'none' "
            "for no limit)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(
            f"a limit of {n} would never run a job: use 1 or more (or `echomq group pause` "
            "to stop the group)")
    return n


def parse_weight(text: str) -> int:
    """A group's weight: a whole number >= 1 (its consecutive turns in the ring)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"not a weight: {text!r} (a whole number >= 1; "
                                         "1 is every group's default)")
    return n


def show_rate(rate: tuple[int, int] | None) -> str:
    return rates.show(rate)


def _queue_group(p: argparse.ArgumentParser) -> None:
    p.add_argument("queue", help="the queue")
    p.add_argument("group", help="the group (e.g. a tenant id)")
    url_flag(p)


def _checked(args: argparse.Namespace) -> None:
    """Names are checked before any connection: a bad one writes nothing."""
    from echomq.core import keyspace
    from echomq.verbs.groups import check_group_name
    keyspace.validate_queue(args.queue)
    if getattr(args, "group", None) is not None:
        check_group_name(args.group)  # "tenant-*" is refused, pointing at the task's defaults


def _stats_rows(conn: Any, queues: list[str]) -> list[dict[str, Any]]:
    from echomq.verbs import groups
    rows = []
    for q in queues:
        for name, st in sorted(groups.stats(conn, q).items()):
            rate = (st.rate_max, st.rate_per_ms) if st.rate_max and st.rate_per_ms else None
            rows.append({"queue": q, "group": name, "waiting": st.waiting,
                         "active": st.active, "limit": st.limit, "rate": show_rate(rate),
                         "weight": st.weight, "paused": bool(st.paused)})
    return rows


def run_list(args: argparse.Namespace) -> int:
    from echomq.core import keyspace
    for q in args.queue or []:
        keyspace.validate_queue(q)
    conn, app = connect(args)
    try:
        queues = args.queue or scan_queues(conn)
        rows = _stats_rows(conn, queues)
    finally:
        app.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        where = f"queue {args.queue[0]!r}" if args.queue and len(args.queue) == 1 else (
            f"any of {len(queues)} queues")
        print(f"(no groups on {where})")
        return 0
    qw = max(5, *(len(r["queue"]) for r in rows))
    gw = max(5, *(len(r["group"]) for r in rows))
    print(f"{'queue':<{qw}}  {'group':<{gw}}  {'waiting':>9}  {'active':>7}  {'limit':>6}  "
          f"{'rate':>9}  {'weight':>6}  paused")
    for r in rows:
        limit = "-" if r["limit"] is None else str(r["limit"])
        print(f"{r['queue']:<{qw}}  {r['group']:<{gw}}  {r['waiting']:>9}  {r['active']:>7}  "
              f"{limit:>6}  {r['rate']:>9}  {r['weight']:>6}  {'yes' if r['paused'] else 'no'}")
    return 0


def act_on(args: argparse.Namespace, act: Any) -> None:
    """Check the queue (and group) named, connect, run ``act(conn)``, close."""
    _checked(args)
    conn, app = connect(args)
    try:
        act(conn)
    finally:
        app.close()


def run_pause(args: argparse.Namespace) -> int:
    from echomq.verbs import groups
    ends: list[int] = []

    def act(conn: Any) -> None:
        end = until_ms(conn, args.until) if args.until is not None else None
        groups.pause(conn, args.queue, args.group, until=end)
        ends.extend([] if end is None else [end])

    act_on(args, act)
    if ends:
        at = dt.datetime.fromtimestamp(ends[0] / 1000, tz=dt.UTC).isoformat(
            timespec="milliseconds")
        print(f"group {args.group} on {args.queue} paused until {at}")
    else:
        print(f"group {args.group} on {args.queue} paused (its jobs wait until "
              f"`echomq group resume {args.queue} {args.group}`)")
    return 0


def run_resume(args: argparse.Namespace) -> int:
    from echomq.verbs import groups
    act_on(args, lambda conn: groups.resume(conn, args.queue, args.group))
    print(f"group {args.group} on {args.queue} resumed")
    return 0


def run_limit(args: argparse.Namespace) -> int:
    from echomq.verbs import groups
    act_on(args, lambda conn: groups.set_limit(conn, args.queue, args.group, args.limit))
    what = "no limit" if args.limit is None else f"at most {args.limit} at once"
    print(f"group {args.group} on {args.queue}: {what}")
    return 0


def run_group_rate(args: argparse.Namespace) -> int:
    from echomq.verbs import groups
    def act(conn: Any) -> None:
        if args.rate is None:
            groups.clear_rate(conn, args.queue, args.group)
        else:
            groups.set_rate(conn, args.queue, args.group, *args.rate)

    act_on(args, act)
    what = "no rate" if args.rate is None else f"rate {show_rate(args.rate)}"
    print(f"group {args.group} on {args.queue}: {what}")
    return 0


def totals(conn: Any, queue: str) -> dict[str, int] | None:
    """``{"groups", "waiting", "active", "paused"}`` summed over ``queue``'s groups (for
    ``echomq stats``), or ``None`` when the queue has none."""
    from echomq.verbs import groups
    stats = groups.stats(conn, queue)
    if not stats:
        return None
    return {"groups": len(stats), "waiting": sum(s.waiting for s in stats.values()),
            "active": sum(s.active for s in stats.values()),
            "paused": sum(1 for s in stats.values() if s.paused)}


def run_group_weight(args: argparse.Namespace) -> int:
    from echomq.verbs import groups
    act_on(args, lambda conn: groups.set_weight(conn, args.queue, args.group, args.weight))
    print(f"group {args.group} on {args.queue}: weight {args.weight}")
    return 0
