"""One job: its row for the job page, and the page's actions (run a scheduled job now,
discard a job that is not running)."""

from __future__ import annotations

import contextlib
from typing import Any

from echomq.core import errors, keyspace, readings
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Eval, Verb, single, verb
from echomq.dashboard.insight.common import STATES, as_fields, score_of, set_key, time_reply_ms
from echomq.verbs import durable, jobs, status


@verb
def job(queue: str, job_id: str) -> Verb[dict[str, Any] | None]:
    """A job's row (``payload`` as bytes, the rest as str) with ``result`` (the kept return
    value, bytes or ``None``), ``has_children`` (a flow parent), ``score`` (its score on its
    state's set: run-at, lease expiry, or the SERVER ms it ended; ``None`` when not on it)
    ``now_ms`` (SERVER), for a durable job ``steps`` (``{"name", "state", "at_ms"}`` in
    order, its ``step:``/``out:`` fields taken off the row), and for a waiting job
    ``waiting_on`` (``jobs.why``'s words);
    ``None`` when there is neither a row nor a kept result (a row deleted at the ack stands
    in as ``status.kept_row``: completed, with its task and runs). Two round trips (three for a
    waiting job)."""
    guard.string("job_id", job_id)
    row_key = keyspace.job_key(queue, job_id)

    def calls() -> Verb[dict[str, Any] | None]:
        row, result, kept, kids, now = yield Batch((
            Command(("HGETALL", row_key)),
            Command(("GET", keyspace.queue_key(queue, f"result:{job_id}"))),
            Command(("HGETALL", keyspace.queue_key(queue, f"kept:{job_id}"))),
            Command(("EXISTS", keyspace.queue_key(queue, f"kids:{job_id}"))),
            Command(("TIME",)),
        ))
        if isinstance(row, Exception):  # a key that is not a hash: shown as a note
            kind = yield Command(("TYPE", row_key))
            return {"state": "?", "note": f"the row is a {readings.text_of(kind)}, not a hash "
                    "(written by another client?)", "result": result, "has_children": False,
                    "score": None, "now_ms": time_reply_ms(now)}
        fields = as_fields(row)
        if not fields:
            if result is None:
                return None
            # completed, its row deleted at the ack (the default retention) but its return
            # value kept (keep_result), its task and runs beside it: the job as app.job and
            # `echomq job` report it
            kept_ = {} if isinstance(kept, Exception) else as_fields(kept)
            return {**status.kept_row({k: readings.text_of(v) for k, v in kept_.items()}),
                    "note": "its row was deleted when it completed (retention); its kept "
                    "result, task and runs remain", "result": result,
                    "has_children": False, "score": None, "now_ms": time_reply_ms(now)}
        out: dict[str, Any] = {k: (v if k == "payload" else readings.text_of(v))
                               for k, v in fields.items()}
        state = out.get("state")
        score = None
        if state in STATES:
            key = set_key(queue, state)
            if state == "pending" and out.get("group"):
                key = keyspace.lane_key(queue, out["group"])
            found = yield Command(("ZSCORE", key, job_id))
            score = score_of(found) if found is not None else None
        out["result"] = result
        out["has_children"] = bool(int(kids))
        out["score"] = score
        out["now_ms"] = time_reply_ms(now)
        if "steps" in out:  # a durable job: its journal, in order, off the facts
            out["steps"] = [s.as_dict() for s in durable.from_row(out, out["now_ms"])]
            for k in [k for k in out if k.startswith(("step:", "out:"))]:
                del out[k]
        if state in ("pending", "scheduled", "waiting-children", "waiting"):
            # what holds it, in the words `echomq why` prints; a read-only ACL user runs no
            # script (echomq acl --role dashboard), and the page goes without the line
            with contextlib.suppress(errors.ServerError):
                out["waiting_on"] = (yield from jobs.why.steps(queue, job_id)).words
        return out

    return calls()


@verb
def run_now(queue: str, job_id: str) -> Verb[bool]:
    """Make a scheduled job due now: its run-at becomes SERVER now (``ZADD XX``, so a job
    that left the schedule meanwhile is not re-added); the next promote releases it.
    ``False`` when it was not scheduled."""
    guard.string("job_id", job_id)
    key = set_key(queue, "scheduled")

    def calls() -> Verb[bool]:
        now = time_reply_ms((yield Command(("TIME",))))
        changed = yield Command(("ZADD", key, "XX", "CH", now, job_id))
        if int(changed):
            return True
        return (yield Command(("ZSCORE", key, job_id))) is not None

    return calls()


@verb
def discard(queue: str, job_id: str) -> Verb[bool]:
    """Delete a job that is not running: its row, its entry on its state's set (or lane),
    its kept result and the unique key it owns, atomically (the ``discard`` script).
    ``False`` when there was no row. Refusals: ``KindError`` (not a JOB id), ``StateError``
    (``EMQSTATE discard active``: cancel a running job instead)."""
    guard.string("job_id", job_id)
    step = Eval(
        "discard",
        (keyspace.job_key(queue, job_id), keyspace.queue_key(queue, f"result:{job_id}")),
        (keyspace.base(queue), job_id),
    )
    return single(step, lambda reply: bool(int(reply)))
