"""The dashboard's JSON (``/api/...``): what the pages show, for tools. Each answer is read
by the route (``router``) or here through one verb, and only shaped here.

Clocks: ``now_ms``/``server_now_ms`` and every ``*_ms`` of a queue are SERVER ms.
"""

from __future__ import annotations

import json
from typing import Any

from echomq.connectors.connector import Connector
from echomq.core import partitions
from echomq.dashboard import insight
from echomq.dashboard.insight.tasks import TaskRow
from echomq.dashboard.web import Response, json_response
from echomq.verbs import taskmetrics
from echomq.verbs import workers as worker_registry


def workers(conn: Connector) -> Response:
    """``/api/workers``: every live worker's record."""
    return json_response(json.dumps(
        [w.as_dict() for w in worker_registry.live(conn, sweep=False)]))


def tasks(rows: list[TaskRow]) -> Response:
    """``/api/tasks?q=``: each task's options and its last hour and day."""
    return json_response(json.dumps([task_json(r) for r in rows]))


def throughput(conn: Connector, queue: str, minutes: int) -> Response:
    """``/api/q/<q>/throughput?minutes=N``: completed and failed per minute."""
    got = insight.throughput(conn, queue, minutes)
    return json_response(json.dumps({"queue": queue, "minutes": [
        {"minute": m, "completed": c, "failed": f} for m, c, f in got]}))


def queues(views: list[insight.QueueView]) -> Response:
    """``/api/queues``: counts per queue (``queues_json``)."""
    return json_response(json.dumps(queues_json(views)))


def queue(view: insight.QueueView) -> Response:
    """``/api/q/<q>``: one queue's view (``view_json``)."""
    return json_response(json.dumps(view_json(view)))


def release(conn: Connector, queue: str, at_ms: int) -> Response:
    """``/api/q/<q>/release?at=MS``: what a promote at ``at_ms`` would release."""
    rel = insight.release_at(conn, queue, at_ms, 20)
    return json_response(json.dumps({
        "at_ms": rel.at_ms, "count": rel.count, "scheduled": rel.scheduled,
        "now_ms": rel.now_ms, "first": [{"id": i, "run_at_ms": s} for i, s in rel.first],
    }))


def queues_json(views: list[insight.QueueView]) -> dict[str, dict[str, Any]]:
    """``{queue: counts}``; a partitioned queue is one entry (``mail``) with its counts
    summed, ``partitions`` (how many) and ``by_partition`` (each partition's counts)."""
    by_name = {v.queue: v for v in views}
    out: dict[str, dict[str, Any]] = {}
    for base, members in partitions.fold(by_name).items():
        if members == [base]:
            out[base] = dict(by_name[base].counts)
            continue
        entry: dict[str, Any] = partitions.sum_counts(by_name[m].counts for m in members)
        entry["partitions"] = len(members)
        entry["by_partition"] = {m: by_name[m].counts for m in members}
        out[base] = entry
    return out


def view_json(v: insight.QueueView) -> dict[str, Any]:
    """One queue's view as JSON (also each queue of the ``/events`` stream)."""
    return {
        "queue": v.queue, "counts": v.counts, "stats": v.stats, "paused": v.paused,
        "now_ms": v.now_ms, "server_now_ms": v.now_ms, "oldest_due_age_ms": v.oldest_due_age_ms,
        "promote_lag_ms": v.promote_lag_ms, "repeat": v.registrations,
        "completed_per_min": [c for _, c, _ in v.series],
        "failed_per_min": [f for _, _, f in v.series],
    }


def task_json(r: TaskRow) -> dict[str, Any]:
    """One task row as JSON."""
    def summary(s: taskmetrics.Summary) -> dict[str, Any]:
        return {"runs": s.runs, "total": s.total, "failures": s.failures,
                "failure_rate": s.failure_rate, "per_minute": s.per_minute,
                "p50_s": s.p50_s, "p95_s": s.p95_s}

    return {"queue": r.queue, "task": r.task, "options": r.options,
            "hour": summary(r.hour), "day": summary(r.day)}
