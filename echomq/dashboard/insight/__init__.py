"""Read verbs for the surfaces (dashboard, ``/metrics``): what a queue looks like now.

Every verb here is bounded: a fixed number of commands per call whatever the queue's size
(``ZCARD``, ``ZCOUNT``, ``ZRANK``, ranged ``ZRANGE`` with a limit, ``HMGET`` of a page),
never a scan of a set or of the keyspace. Like the transitions, each verb runs on either
connector.

Clocks: ``now_ms`` in every view is the SERVER clock (``TIME``, read in the same round
trip), the clock the schedule, leases and death times are priced on; ages and lags are
SERVER now minus a stored SERVER score. The age of the head of ``pending`` is SERVER now
minus its id's mint time (HOST ms of the producer that minted it).

One module per page family (``insight.page`` etc. stay the way to call them): ``overview``
(the queue at a glance, folded over partitions), ``listing`` (a state's jobs by cursor),
``job`` (one job and its actions), ``schedule`` (the schedule clock), ``group_pages``,
``tasks`` (the Tasks pages' rows: each task's options and last hour and day).
"""

from __future__ import annotations

from echomq.dashboard.insight.common import (
    NEWEST_FIRST,
    PAGE_MAX,
    SERIES_SLOTS,
    SET_OF,
    STATES,
    set_key,
)
from echomq.dashboard.insight.group_pages import GroupPage, group_page
from echomq.dashboard.insight.job import discard, job, run_now
from echomq.dashboard.insight.listing import (
    Page,
    folded_cursors,
    merge_pages,
    page,
    parse_cursor,
    preview,
)
from echomq.dashboard.insight.overview import (
    QueueView,
    fold_views,
    overview,
    series_of,
    throughput,
)
from echomq.dashboard.insight.schedule import Release, Timeline, release_at, timeline

__all__ = [
    "NEWEST_FIRST", "PAGE_MAX", "SERIES_SLOTS", "SET_OF", "STATES", "GroupPage", "Page",
    "QueueView", "Release", "Timeline", "discard", "fold_views", "folded_cursors",
    "group_page", "job", "merge_pages", "overview", "page", "parse_cursor", "preview",
    "release_at", "run_now", "series_of", "set_key", "throughput", "timeline",
]
