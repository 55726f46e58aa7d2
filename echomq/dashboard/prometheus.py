"""``/metrics``: the queues in Prometheus' text format (version 0.0.4), from the server.

Every number comes from keys on the server (counts from the state sets, totals from
``emq:{q}:stats`` that the transitions keep, runtime numbers from ``emq:{q}:metrics`` that
consumers fold in with ``metrics.observe``), so any dashboard instance reports the whole
fleet and a restart loses nothing. A scrape costs one round trip per queue (``insight.
overview``, a fixed number of commands), whatever the queues hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from echomq.connectors.connector import Connector
from echomq.core import errors
from echomq.dashboard import insight
from echomq.verbs import metrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TOTALS = ("completed", "failed", "retried", "dead", "cancelled", "enqueued", "corrupt")


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def render(conn: Connector, queues: Iterable[str]) -> str:
    """The exposition text for ``queues``."""
    views = []
    for x in queues:
        try:
            views.append(insight.overview(conn, x))
        except errors.ServerError:  # a key of the wrong type: that queue is left out
            continue
    out: list[str] = []

    def family(name: str, kind: str, help_: str) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")

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
    return "\n".join(out) + "\n"
