"""``echomq repeat list|add|cancel|pause|resume|next|run|backfill``: browse and manage
recurring registrations.

Every command takes ``--url`` (default ``$ECHOMQ_URL``, else the embedded server) and
``--queue`` (default ``default``). Times print in the registration's zone for a cron
registration and in UTC otherwise; repeat scores are HOST-clock ms (a pause's ``--until``
is SERVER time). ``run`` fires one occurrence now (the schedule kept); ``backfill`` fires
the slots of a past range not fired before; ``next`` marks the slots an exclusion passes
over and the run-at a jitter gives.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from echomq.cli.common import (
    connect,
    parse_kwargs,
    scan_queues,
    until_ms,
    until_type,
    url_flag,
    word_value,
)
from echomq.core.times import parse_instant

# the overlap policies (echomq.verbs.repeat.OVERLAP), without importing the verbs here
OVERLAP = ("allow", "skip", "buffer_one", "buffer_all", "cancel_other")


def register(sub: Any) -> None:
    p = sub.add_parser("repeat", help="recurring registrations: list, add, cancel, pause, next")
    verbs = p.add_subparsers(dest="repeat_command", metavar="VERB")

    ls = verbs.add_parser("list", help="every registration (of every queue), soonest first")
    url_flag(ls)
    ls.add_argument("--queue", default=None, help="only this queue (default: every queue)")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    ls.set_defaults(func=run_list)

    add = verbs.add_parser("add", help="register (or explicitly update) a recurrence")
    _common(add)
    add.add_argument("name", help="the registration name (unique per queue)")
    how = add.add_mutually_exclusive_group(required=True)
    how.add_argument("--every", default=None, help="interval: 500ms, 30s, 5m, 1h, 1d")
    how.add_argument("--cron", default=None, help="cron expression, e.g. '0 3 * * *' or @daily")
    add.add_argument("--tz", default="UTC", help="IANA zone for --cron (default UTC)")
    what = add.add_mutually_exclusive_group(required=True)
    what.add_argument("--payload", default=None, help="the occurrence payload, verbatim")
    what.add_argument("--task", nargs="+", default=None, metavar=("TASK", "ARG"),
                      help="a task and its arguments (each JSON, else a string): the payload "
                      "is that call")
    add.add_argument("--kwargs", default=None, help="with --task: keyword arguments (JSON)")
    add.add_argument("--first-in", default=None, help="with --every: first run after this")
    add.add_argument("--start", default=None, help="no run before (ISO-8601 or epoch ms)")
    add.add_argument("--end", default=None, help="no run after (ISO-8601 or epoch ms)")
    add.add_argument("--limit", type=int, default=None, help="stop after this many runs")
    add.add_argument("--catchup", choices=("skip", "latest", "all"), default=None,
                     help="missed runs after downtime (default: fire one and move on)")
    add.add_argument("--window", default=None, help="catch-up window (with skip or all)")
    add.add_argument("--cap", type=int, default=None, help="catch-up cap (with all)")
    add.add_argument("--overlap", choices=OVERLAP, default="allow",
                     help="a run due while the last one is live: allow, skip, buffer_one, "
                          "buffer_all or cancel_other (Temporal's meanings)")
    add.add_argument("--jitter", default=None,
                     help="move each run-at by a deterministic amount below this (e.g. 30s)")
    add.add_argument("--exclude", action="append", default=None, metavar="DATE|CRON",
                     help="a date (YYYY-MM-DD) or cron expression whose runs do not fire "
                          "(repeatable)")
    add.set_defaults(func=run_add)

    cancel = _named(verbs, "cancel", "remove a registration (its jobs stay)")
    cancel.set_defaults(func=run_cancel)

    pause = _named(verbs, "pause", "stop firing a registration (record and next run kept)")
    pause.add_argument("--until", type=until_type, default=None, metavar="T",
                       help="resume by itself at T: an ISO-8601 instant, epoch ms, or a "
                            "duration from the server's now (30m, 2h)")
    pause.set_defaults(func=run_hold, hold="pause")

    resume = _named(verbs, "resume", "fire a paused registration again, from now")
    resume.set_defaults(func=run_hold, hold="resume")

    nxt = verbs.add_parser("next", help="the next runs of a registration or a cron expression")
    _common(nxt)
    nxt.add_argument("name", help="a registration name, or a cron expression")
    nxt.add_argument("--count", type=int, default=5, help="how many runs (default 5)")
    nxt.add_argument("--tz", default="UTC", help="zone for a bare cron expression")
    nxt.set_defaults(func=run_next)

    run = _named(verbs, "run", "run one occurrence now (the schedule is kept)")
    run.set_defaults(func=run_trigger)

    fill = _named(verbs, "backfill", "fire the runs of a past range not fired before")
    fill.add_argument("--from", dest="start", required=True, type=parse_instant,
                      help="the range's start (ISO-8601 or epoch ms), included")
    fill.add_argument("--to", dest="end", required=True, type=parse_instant,
                      help="the range's end (ISO-8601 or epoch ms), excluded")
    fill.set_defaults(func=run_backfill)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _named(verbs: Any, word: str, text: str) -> argparse.ArgumentParser:
    """The parser of ``echomq repeat WORD NAME``: one registration, by name."""
    p: argparse.ArgumentParser = verbs.add_parser(word, help=text)
    _common(p)
    p.add_argument("name")
    return p


def _common(p: argparse.ArgumentParser) -> None:
    url_flag(p)
    p.add_argument("--queue", default="default", help="the queue (default: default)")


def _close(app: Any) -> None:
    close = getattr(app, "close", None)
    if callable(close):
        close()


def _when(ms: int | None, tz: str | None) -> str:
    if ms is None:
        return "-"
    from echomq.core import cron
    try:
        zone = cron.zone(tz) if tz else UTC
    except cron.CronError:  # a record edited by hand: list it in UTC rather than fail the list
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds") + \
            f" (unknown zone {tz!r})"
    return datetime.fromtimestamp(ms / 1000, zone).isoformat(timespec="seconds")


def _cadence(entry: dict[str, Any]) -> str:
    if entry.get("cron"):
        return f"cron {entry['cron']!r} {entry.get('tz') or 'UTC'}"
    if entry.get("every_ms"):
        return f"every {_duration(entry['every_ms'])}"
    return "(no record)"


def _duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _plain(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry for JSON: the template as text; one under an app's codec (``App(codec=)``)
    opened with ``ECHOMQ_KEYS``, else ``"encrypted"``."""
    from echomq.core import codecs

    out = dict(entry)
    tpl = out.get("template")
    if isinstance(tpl, bytes) and codecs.sealed(tpl):
        try:
            _, opened = codecs.shown(tpl)
        except ValueError:  # a malformed envelope: shown as it is
            opened = tpl
        tpl = opened if opened is not None else "encrypted"
    if isinstance(tpl, bytes):
        out["template"] = tpl.decode("utf-8", "replace")
    elif tpl is not None:
        out["template"] = tpl
    return out


def run_list(args: argparse.Namespace) -> int:
    from echomq.verbs import repeat

    conn, app = connect(args)
    try:
        queues = [args.queue] if args.queue else scan_queues(conn)
        entries = [{"queue": q, **e} for q in queues for e in repeat.records(conn, q)]
    finally:
        _close(app)
    entries.sort(key=lambda e: (e["next_at"] is None, e["next_at"] or 0, e["queue"]))
    if args.json:
        for e in entries:
            print(json.dumps(_plain(e), sort_keys=True))
        return 0
    if not entries:
        where = f"queue {args.queue!r}" if args.queue else f"any of {len(queues)} queues"
        print(f"no registrations on {where}")
        return 0
    rows = [("QUEUE", "NAME", "CADENCE", "NEXT", "FIRED", "LAST")]
    for e in entries:
        nxt = _when(e["next_at"], e.get("tz")) if not e.get("done") else f"done ({e['done']})"
        if e.get("paused"):
            nxt = f"paused ({nxt})"
        limit = f"/{e['limit']}" if e.get("limit") else ""
        rows.append((e["queue"], e["name"], _cadence(e), nxt, f"{e.get('fired', 0)}{limit}",
                     e.get("last_id", "-")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def run_add(args: argparse.Namespace) -> int:
    from echomq.core.times import parse_duration, parse_instant
    from echomq.verbs import repeat

    if args.task is not None:
        from echomq.core.payload import encode

        kwargs = parse_kwargs(args.kwargs)
        task, *words = args.task
        template: bytes | str = encode(task, [word_value(a) for a in words], kwargs)
    else:
        template = args.payload
    try:
        spec = _definition(repeat, args, template, parse_duration, parse_instant)
        first_in = (parse_duration(args.first_in)
                    if args.every is not None and args.first_in is not None else 0)
        outcome = _upsert(repeat, args, spec, first_in)
    except (ValueError, TypeError) as exc:
        print(f"echomq: {exc}", file=sys.stderr)
        return 2
    print(outcome)
    return 0


def _definition(repeat: Any, args: argparse.Namespace, template: bytes | str,
                duration: Any, instant: Any) -> Any:
    """The ``repeat.Definition`` the flags give, every guard run before the connection (and
    the embedded server) is touched."""
    how: dict[str, Any] = ({"every_ms": duration(args.every)} if args.every is not None
                           else {"cron": args.cron, "tz": args.tz})
    return repeat.Definition.of(
        template=template, **how,
        start_at=instant(args.start) if args.start else None,
        end_at=instant(args.end) if args.end else None,
        limit=args.limit, catchup=args.catchup,
        window_ms=duration(args.window) if args.window else None,
        cap=args.cap, overlap=args.overlap,
        jitter_ms=duration(args.jitter) if args.jitter else 0,
        exclude=tuple(args.exclude or ()))


def _upsert(repeat: Any, args: argparse.Namespace, spec: Any, first_in: int) -> Any:
    from echomq.verbs import registry

    conn, app = connect(args)
    try:
        got = repeat.put(conn, args.queue, args.name, spec, first_in_ms=first_in)
        registry.note(conn, args.queue)  # once registered: a refusal writes nothing
        return got
    finally:
        _close(app)


def run_cancel(args: argparse.Namespace) -> int:
    from echomq.verbs import repeat
    conn, app = connect(args)
    try:
        removed = repeat.cancel(conn, args.queue, args.name)
    finally:
        _close(app)
    if not removed:  # as pause/resume/next say it: on stderr, naming the queue looked in
        print(f"echomq: no registration named {args.name!r} on {args.queue!r}", file=sys.stderr)
        return 1
    print("cancelled")
    return 0


def run_hold(args: argparse.Namespace) -> int:
    """``repeat pause``/``repeat resume``: exit 1 with a plain sentence for an unknown name."""
    from echomq.verbs import repeat
    try:
        conn, app = connect(args)
        try:
            if args.hold == "pause":
                until = getattr(args, "until", None)
                end = until_ms(conn, until) if until is not None else None
                outcome = repeat.pause(conn, args.queue, args.name, until=end)
                if end is not None and outcome != "absent":
                    outcome = f"{outcome} until {_when(end, None)}"
            else:
                outcome = repeat.resume(conn, args.queue, args.name)
        finally:
            _close(app)
    except ValueError as exc:
        print(f"echomq: {exc}", file=sys.stderr)
        return 2
    if outcome == "absent":
        print(f"echomq: no registration named {args.name!r} on {args.queue!r}", file=sys.stderr)
        return 1
    print(outcome)
    return 0


def run_next(args: argparse.Namespace) -> int:
    from echomq.core import cron
    from echomq.verbs import repeat
    if args.count < 1:
        raise SystemExit("echomq: --count must be at least 1")
    entry = None
    if not args.name.startswith("@") and len(args.name.split()) != 5:
        conn, app = connect(args)
        try:
            entry = repeat.get(conn, args.queue, args.name)
        finally:
            _close(app)
        if entry is None:
            print(f"echomq: no registration named {args.name!r} on {args.queue!r}",
                  file=sys.stderr)
            return 1
    try:
        if entry is None:
            runs = repeat.next_runs(args.name, args.count, args.tz)
            for when in runs:
                print(when.isoformat(timespec="seconds"))
            return 0
        slots = repeat.preview(entry, args.count)
    except cron.CronError as exc:
        print(f"echomq: {exc}", file=sys.stderr)
        return 2
    if not slots:
        print(f"{args.name}: no further run ({entry.get('done') or 'finished'})")
    zone = entry.get("tz") or args.tz  # as next_runs reads a record: its zone, else --tz
    for s in slots:
        line = _when(s.slot, zone)
        if s.excluded:
            line += "  excluded"
        elif s.run_at != s.slot:
            line += f"  (runs at {_when(s.run_at, zone)}: jitter)"
        print(line)
    return 0


def run_trigger(args: argparse.Namespace) -> int:
    from echomq.verbs import repeat
    conn, app = connect(args)
    try:
        job_id = repeat.trigger(conn, args.queue, args.name)
    except LookupError:
        print(f"echomq: no registration named {args.name!r} on {args.queue!r}", file=sys.stderr)
        return 1
    finally:
        _close(app)
    print(f"{job_id} enqueued {args.queue}")
    return 0


def run_backfill(args: argparse.Namespace) -> int:
    from echomq.verbs import repeat
    if args.end <= args.start:
        print("echomq: --to must be after --from", file=sys.stderr)
        return 2
    conn, app = connect(args)
    try:
        fired = repeat.backfill(conn, args.queue, args.name, args.start, args.end)
    except LookupError:
        print(f"echomq: no registration named {args.name!r} on {args.queue!r}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"echomq: {exc}", file=sys.stderr)
        return 2
    finally:
        _close(app)
    for job_id in fired:
        print(f"{job_id} enqueued {args.queue}")
    print(f"{len(fired)} fired (runs of the range fired before are left out)")
    return 0
