"""The dashboard's actions: what a POST does (retry, run now, delete or cancel a job; the
bulk retry/delete of dead jobs after a confirmation; pause/resume a queue, a group or a
registration; run a registration now or backfill a range of it; quiet or stop a live
worker), each through a verb. The access gate has already let the POST through."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from echomq.connectors.connector import Connector
from echomq.core import errors, keyspace
from echomq.core.times import epoch_ms
from echomq.dashboard import insight, pages, worker_pages
from echomq.dashboard.web import Request, Response, e, html_response, q, redirect
from echomq.verbs import dead, flows, groups, jobs, repeat

BULK_MAX = 500


def act(conn: Connector, req: Request) -> Response:
    """Run the action a POST names (its path) and answer where the browser goes next."""
    parts = [unquote(p) for p in req.path.split("/") if p]
    if parts and parts[0] == "workers":  # /workers/<id|*>/quiet|stop
        return worker_pages.act(conn, req, parts)
    form = req.form()
    if len(parts) < 3 or parts[0] != "q":
        raise LookupError(req.path)
    queue = keyspace.validate_queue(parts[1])
    rest = parts[2:]
    back = req.url(f"/q/{q(queue)}")
    # /q/<q>/job/<id>/<op> (and the older /q/<q>/dead/<id>/retry)
    if len(rest) == 3 and rest[0] in ("job", "dead"):
        job_id, op = rest[1], rest[2]
        ops: dict[str, Callable[[], Any]] = {
            "retry": lambda: dead.revive(conn, queue, job_id),
            "run": lambda: insight.run_now(conn, queue, job_id),
            "delete": lambda: insight.discard(conn, queue, job_id),
            "cancel": lambda: flows.cancel(conn, queue, job_id),  # a flow root: its subtree
        }
        if op not in ops:
            raise LookupError(op)
        ops[op]()
        if rest[0] == "dead" or op == "delete":
            return redirect(back + ("?state=dead" if rest[0] == "dead" else ""))
        return redirect(req.url(f"/q/{q(queue)}/job/{q(job_id)}"))
    if rest == ["bulk"]:
        return bulk(conn, req, queue, form)
    if len(rest) == 3 and rest[0] == "repeat" and rest[2] in (
            "cancel", "pause", "resume", "run", "backfill"):
        if rest[2] == "cancel":
            repeat.cancel(conn, queue, rest[1])
        elif rest[2] == "pause":
            repeat.pause(conn, queue, rest[1])
        elif rest[2] == "resume":
            repeat.resume(conn, queue, rest[1])
        elif rest[2] == "run":
            repeat.trigger(conn, queue, rest[1])
        else:
            start, end = (_utc_ms(form.get(k, [""])[0]) for k in ("from", "to"))
            repeat.backfill(conn, queue, rest[1], start, end)
        return redirect(req.url(f"/q/{q(queue)}/repeat"))
    if rest == ["pause"]:
        jobs.pause(conn, queue)
        return redirect(req.url("/"))
    if rest == ["resume"]:
        jobs.resume(conn, queue)
        return redirect(req.url("/"))
    if len(rest) == 3 and rest[0] == "groups" and rest[2] in ("pause", "resume"):
        toggle = groups.pause if rest[2] == "pause" else groups.resume
        toggle(conn, queue, rest[1])
        return redirect(req.url(f"/q/{q(queue)}/groups"))
    raise LookupError(req.path)

def _utc_ms(text: str) -> int:
    """A ``datetime-local`` form value (or any ISO-8601 text), read in UTC, as epoch ms."""
    when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return epoch_ms(when if when.tzinfo else when.replace(tzinfo=UTC))


def bulk(conn: Connector, req: Request, queue: str, form: dict[str, list[str]]) -> Response:
    """Retry or delete the chosen dead jobs (at most ``BULK_MAX``), after a confirmation:
    without ``confirm=1`` the answer is a page that lists them and asks."""
    op = form.get("op", [""])[0]
    if op not in ("retry", "delete"):
        raise ValueError("op must be retry or delete")
    chosen = form.get("id", [])[:BULK_MAX]
    if form.get("all", [""])[0] == "1":
        chosen = [x["id"] for x in dead.list_dead(conn, queue, 0, BULK_MAX)]
    if not chosen:
        raise ValueError("no job chosen")
    if form.get("confirm", [""])[0] != "1":
        return html_response(200, pages.confirm_bulk(req, queue, op, chosen))
    done = 0
    for job_id in chosen:
        try:
            if op == "retry":
                dead.revive(conn, queue, job_id)
            else:
                insight.discard(conn, queue, job_id)
            done += 1
        except errors.ServerError:
            continue  # moved meanwhile: the others still go
    return redirect(req.url(f"/q/{q(queue)}?state=dead&done={done}&op={e(op)}"))
