"""``/metrics``: the queues in Prometheus' text format (version 0.0.4), from the server.

Every number comes from keys on the server (counts from the state sets, totals from
``emq:{q}:stats`` that the transitions keep, runtime numbers from ``emq:{q}:metrics`` that
consumers fold in with ``metrics.observe``, per-task runs and run times from
``verbs.taskmetrics``, live workers from ``verbs.workers``, groups from ``groups.stats``),
so any dashboard instance reports the whole fleet and a restart loses nothing. A scrape
costs a few round trips per queue (``insight.overview``, a fixed number of commands; one
``HGETALL`` of the task totals; the groups' read for a queue that has groups) and one for
the worker registry, whatever the queues hold.

``echomq_up`` is 1 when the server answered the whole scrape; while Valkey is unreachable
the scrape still answers (HTTP 200) with ``echomq_up 0`` alone, so an alert on the server
being down fires from the dashboard's own scrape (``scrape``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from echomq.connectors.connector import Connector
from echomq.core import errors
from echomq.dashboard import insight
from echomq.verbs import groups, metrics, taskmetrics, workers

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TOTALS = ("completed", "failed", "retried", "dead", "cancelled", "expired", "enqueued",
          "corrupt")
#: a queue with more groups than this reports no per-group series (cardinality), only
#: ``echomq_groups``
MAX_GROUP_SERIES = 500
UP_HELP = "1 when the Valkey server answered this scrape, 0 when it is unreachable."


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _family(name: str, kind: str, help_: str) -> list[str]:
    return [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]


def scrape(conn: Connector, queues: Callable[[], Iterable[str]]) -> str:
    """The exposition text for the queues ``queues()`` names, or, when the server cannot
    be reached (or answers that it is loading, read-only, ...), ``echomq_up 0`` alone."""
    try:
        return render(conn, queues())
    except (errors.WireError, errors.Unavailable):
        return down()


def down() -> str:
    """The scrape while Valkey is unreachable."""
    return f"# HELP echomq_up {UP_HELP}\n# TYPE echomq_up gauge\nechomq_up 0\n"


def render(conn: Connector, queues: Iterable[str]) -> str:
    """The exposition text for ``queues`` (a ``WireError`` when the server is away)."""
    views = []
    near = int(time.time() * 1000)  # HOST clock: a hint for the ring read (one round trip)
    for x in queues:
        try:
            views.append(insight.overview(conn, x, near))
        except errors.ServerError:  # a key of the wrong type: that queue is left out
            continue
    out: list[str] = []

    def family(name: str, kind: str, help_: str) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")

    family("echomq_up", "gauge", UP_HELP)
    out.append("echomq_up 1")
    family("echomq_jobs", "gauge", "Jobs per state per queue (the state sets' sizes).")
    for v in views:
        for state, n in v.counts.items():
            out.append(f'echomq_jobs{{queue="{_label(v.queue)}",state="{state}"}} {n}')
    family("echomq_oldest_due_age_seconds", "gauge",
           "How long the oldest claimable job has waited (SERVER clock).")
    for v in views:
        age = (v.oldest_due_age_ms or 0) / 1000
        out.append(f'echomq_oldest_due_age_seconds{{queue="{_label(v.queue)}"}} {_num(age)}')
    family("echomq_promote_lag_seconds", "gauge",
           "How far past its run-at the earliest scheduled job still sits (SERVER clock).")
    for v in views:
        out.append(f'echomq_promote_lag_seconds{{queue="{_label(v.queue)}"}} '
                   f"{_num(v.promote_lag_ms / 1000)}")
    family("echomq_paused", "gauge", "1 while the queue is paused.")
    for v in views:
        out.append(f'echomq_paused{{queue="{_label(v.queue)}"}} {int(v.paused)}')
    for total in TOTALS:
        name = f"echomq_jobs_{total}_total"
        family(name, "counter", f"Jobs {total}, counted by the transitions on the server.")
        for v in views:
            out.append(f'{name}{{queue="{_label(v.queue)}"}} {v.stats.get(total, 0)}')
    family("echomq_handler_duration_seconds", "histogram",
           "Handler run time, reported by the consumers (HOST monotonic clock).")
    observed = {v.queue: metrics.observed(dict(v.metrics)) for v in views}
    for v in views:
        o = observed[v.queue]
        lab = _label(v.queue)
        running = 0
        for bound, n in zip([*metrics.BUCKETS_S, math.inf], o.buckets, strict=True):
            running += n
            out.append(f'echomq_handler_duration_seconds_bucket{{queue="{lab}",'
                       f'le="{_num(bound)}"}} {running}')
        out.append(f'echomq_handler_duration_seconds_sum{{queue="{lab}"}} '
                   f"{_num(o.duration_sum_s)}")
        out.append(f'echomq_handler_duration_seconds_count{{queue="{lab}"}} '
                   f"{o.duration_count}")
    family("echomq_beat_duration_seconds", "summary",
           "Beat (reap + promote) time, reported by the consumers.")
    for v in views:
        o = observed[v.queue]
        lab = _label(v.queue)
        out.append(f'echomq_beat_duration_seconds_sum{{queue="{lab}"}} {_num(o.beat_sum_s)}')
        out.append(f'echomq_beat_duration_seconds_count{{queue="{lab}"}} {o.beat_count}')
    family("echomq_beat_last_duration_seconds", "gauge", "The last reported beat's time.")
    for v in views:
        last = observed[v.queue].beat_last_s
        out.append(f'echomq_beat_last_duration_seconds{{queue="{_label(v.queue)}"}} '
                   f"{_num(last or 0.0)}")
    family("echomq_degraded_streak", "gauge",
           "Consecutive degraded beats last reported (0: healthy).")
    for v in views:
        out.append(f'echomq_degraded_streak{{queue="{_label(v.queue)}"}} '
                   f"{observed[v.queue].degraded}")
    out += _tasks(conn, [v.queue for v in views])
    out += _workers(conn, [v.queue for v in views])
    out += _groups(conn, [v for v in views if v.groups])
    return "\n".join(out) + "\n"


def _tasks(conn: Connector, queues: list[str]) -> list[str]:
    """Runs per task and outcome, and the run-time histogram per task (running totals the
    workers flush to ``emq:{q}:tm``)."""
    out: list[str] = []
    per_queue = {}
    for x in queues:
        try:
            per_queue[x] = taskmetrics.totals(conn, x)
        except errors.ServerError:
            continue
    name = "echomq_task_runs_total"
    out += _family(name, "counter", "Task runs by outcome (completed, retried, dead, cancelled, "
           "timed_out), counted by the workers.")
    for x, tasks in per_queue.items():
        for task, t in tasks.items():
            for outcome, n in t.runs.items():
                out.append(f'{name}{{queue="{_label(x)}",task="{_label(task)}",'
                           f'outcome="{outcome}"}} {n}')
    h = "echomq_task_duration_seconds"
    out += _family(h, "histogram", "Task run time (handler time, HOST monotonic clock).")
    for x, tasks in per_queue.items():
        for task, t in tasks.items():
            lab = f'queue="{_label(x)}",task="{_label(task)}"'
            running = 0
            for bound, n in zip([*metrics.BUCKETS_S, math.inf], t.buckets, strict=True):
                running += n
                out.append(f'{h}_bucket{{{lab},le="{_num(bound)}"}} {running}')
            out.append(f"{h}_sum{{{lab}}} {_num(t.sum_s)}")
            out.append(f"{h}_count{{{lab}}} {t.count}")
    return out


def _workers(conn: Connector, queues: list[str]) -> list[str]:
    """Live workers per queue, their slots (concurrency) and the busy ones."""
    live = workers.live(conn, sweep=False)
    out: list[str] = []
    rows = []
    for x in queues:
        serving = [w for w in live if x in w.queues]
        rows.append((x, len(serving), sum(1 for w in serving if w.state == "running"),
                     sum(w.concurrency for w in serving),
                     sum(1 for w in serving for r in w.busy if r.queue == x)))
    for name, kind, help_, col in (
        ("echomq_workers", "gauge", "Live workers whose queues include this one.", 1),
        ("echomq_workers_claiming", "gauge",
         "Live workers claiming from this queue (neither quiet nor stopping).", 2),
        ("echomq_worker_slots", "gauge",
         "Slots (concurrency) of the live workers serving this queue.", 3),
        ("echomq_worker_busy_slots", "gauge", "Jobs of this queue running now.", 4),
    ):
        out += _family(name, kind, help_)
        out += [f'{name}{{queue="{_label(r[0])}"}} {r[col]}' for r in rows]
    return out


def _groups(conn: Connector, views: list[insight.QueueView]) -> list[str]:
    """Per group: jobs waiting in its lane and running, its limit, paused (``groups.stats``;
    only for queues with at most ``MAX_GROUP_SERIES`` groups)."""
    out: list[str] = []
    out += _family("echomq_groups", "gauge", "Groups seen on the queue.")
    out += [f'echomq_groups{{queue="{_label(v.queue)}"}} {v.groups}' for v in views]
    stats = {}
    for v in views:
        if v.groups <= MAX_GROUP_SERIES:
            try:
                stats[v.queue] = groups.stats(conn, v.queue)
            except errors.ServerError:
                continue
    out += _family("echomq_group_jobs", "gauge", "Jobs of a group, waiting in its lane or active.")
    for x, by_group in stats.items():
        for g, st in by_group.items():
            lab = f'queue="{_label(x)}",group="{_label(g)}"'
            out.append(f'echomq_group_jobs{{{lab},state="waiting"}} {st.waiting}')
            out.append(f'echomq_group_jobs{{{lab},state="active"}} {st.active}')
    out += _family("echomq_group_limit", "gauge", "A group's concurrency limit (absent: none).")
    for x, by_group in stats.items():
        for g, st in by_group.items():
            if st.limit is not None:
                out.append(f'echomq_group_limit{{queue="{_label(x)}",group="{_label(g)}"}} '
                           f"{st.limit}")
    out += _family("echomq_group_paused", "gauge", "1 while the group is paused.")
    for x, by_group in stats.items():
        for g, st in by_group.items():
            out.append(f'echomq_group_paused{{queue="{_label(x)}",group="{_label(g)}"}} '
                       f"{int(st.paused)}")
    return out
