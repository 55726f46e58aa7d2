"""The dashboard's actions: what a POST does (retry, run now, delete or cancel a job; the
bulk retry/delete of dead jobs after a confirmation; pause/resume a queue, a group or a
registration; run a registration now or backfill a range of it; quiet or stop a live
worker), each through a verb; the route table (``router.ROUTES``) names which answers which
path. The access gate has already let the POST through."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from echomq.connectors.connector import Connector
from echomq.core import errors
from echomq.core.times import epoch_ms
from echomq.dashboard import insight, pages
from echomq.dashboard.web import Request, Response, e, html_response, q, redirect
from echomq.verbs import dead as dead_jobs
from echomq.verbs import flows, groups, jobs, repeat, workers

BULK_MAX = 500


def worker(conn: Connector, req: Request, worker_id: str, op: str) -> Response:
    """``POST /workers/<id>/quiet|stop`` (``*``: every live worker): ``workers.request``."""
    if op not in workers.ACTIONS:
        raise LookupError(req.path)
    asked = workers.request(conn, worker_id, op)
    if not asked:
        raise LookupError(worker_id)
    return redirect(req.url("/workers"))


def job(conn: Connector, req: Request, queue: str, job_id: str, op: str,
        dead: bool = False) -> Response:
    """``POST /q/<q>/job/<id>/retry|run|delete|cancel`` (a flow root's cancel takes its
    subtree); ``dead``: the older ``/q/<q>/dead/<id>/<op>``, which goes back to the dead
    list."""
    ops: dict[str, Callable[[], Any]] = {
        "retry": lambda: dead_jobs.revive(conn, queue, job_id),
        "run": lambda: insight.run_now(conn, queue, job_id),
        "delete": lambda: insight.discard(conn, queue, job_id),
        "cancel": lambda: flows.cancel(conn, queue, job_id),
    }
    if op not in ops:
        raise LookupError(op)
    ops[op]()
    back = req.url(f"/q/{q(queue)}")
    if dead or op == "delete":
        return redirect(back + ("?state=dead" if dead else ""))
    return redirect(req.url(f"/q/{q(queue)}/job/{q(job_id)}"))


REGISTRATION_OPS = ("cancel", "pause", "resume", "run", "backfill")


def registration(conn: Connector, req: Request, queue: str, name: str, op: str) -> Response:
    """``POST /q/<q>/repeat/<name>/cancel|pause|resume|run|backfill`` (backfill: the
    form's ``from`` and ``to``, read in UTC)."""
    if op not in REGISTRATION_OPS:
        raise LookupError(req.path)
    if op == "cancel":
        repeat.cancel(conn, queue, name)
    elif op == "pause":
        repeat.pause(conn, queue, name)
    elif op == "resume":
        repeat.resume(conn, queue, name)
    elif op == "run":
        repeat.trigger(conn, queue, name)
    else:
        form = req.form()
        start, end = (_utc_ms(form.get(k, [""])[0]) for k in ("from", "to"))
        repeat.backfill(conn, queue, name, start, end)
    return redirect(req.url(f"/q/{q(queue)}/repeat"))


def queue(conn: Connector, req: Request, name: str, pause: bool) -> Response:
    """``POST /q/<q>/pause|resume``: the queue's claims off or on again."""
    if pause:
        jobs.pause(conn, name)
    else:
        jobs.resume(conn, name)
    return redirect(req.url("/"))


def group(conn: Connector, req: Request, queue: str, name: str, op: str) -> Response:
    """``POST /q/<q>/groups/<group>/pause|resume``."""
    if op not in ("pause", "resume"):
        raise LookupError(req.path)
    toggle = groups.pause if op == "pause" else groups.resume
    toggle(conn, queue, name)
    return redirect(req.url(f"/q/{q(queue)}/groups"))


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
        chosen = [x["id"] for x in dead_jobs.list_dead(conn, queue, 0, BULK_MAX)]
    if not chosen:
        raise ValueError("no job chosen")
    if form.get("confirm", [""])[0] != "1":
        return html_response(200, pages.confirm_bulk(req, queue, op, chosen))
    done = 0
    for job_id in chosen:
        try:
            if op == "retry":
                dead_jobs.revive(conn, queue, job_id)
            else:
                insight.discard(conn, queue, job_id)
            done += 1
        except errors.ServerError:
            continue  # moved meanwhile: the others still go
    return redirect(req.url(f"/q/{q(queue)}?state=dead&done={done}&op={e(op)}"))
