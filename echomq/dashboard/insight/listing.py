"""Pages of one state's jobs behind a ``score~id`` cursor (never an offset walk), the
payload preview, and a partitioned queue's pages merged into one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from echomq.core import codecs, keyspace, readings
from echomq.core import guards as guard
from echomq.core.steps import Batch, Command, Verb, scored, text, verb
from echomq.dashboard.insight.common import (
    NEWEST_FIRST,
    PAGE_MAX,
    score_of,
    set_key,
    time_reply_ms,
    whole_or,
)

_ROW_FIELDS = ("state", "attempts", "error", "payload", "failures", "delays", "group",
               "priority", "progress")


#: what a reader without the keys shows for an encrypted payload or result
ENCRYPTED = "encrypted"


def preview(payload: Any, limit: int = 120) -> tuple[str | None, str]:
    """``(task name, arguments preview)`` of a payload: the friendly layer's JSON
    ``{"task", "args", "kwargs"}`` when it is that, else the raw text, cut at ``limit``."""
    if payload is None:
        return None, ""
    raw = payload if isinstance(payload, bytes) else str(payload).encode()
    if codecs.sealed(raw):  # coded: opened with $ECHOMQ_KEYS, else named but not shown
        task, opened = codecs.shown(raw)
        if opened is None:
            return task or None, ENCRYPTED
        raw = opened
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("task"), str):
        args = [json.dumps(a, ensure_ascii=False) for a in body.get("args") or []]
        kwargs = body.get("kwargs") or {}
        if isinstance(kwargs, dict):
            args += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
        shown = ", ".join(args)
    else:
        return None, _cut(raw.decode(errors="replace"), limit)
    return body["task"], _cut(shown, limit)


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Page:
    """A page of one state's jobs and the cursor of the next page (``None``: last page)."""

    state: str
    entries: list[dict[str, Any]]
    next_cursor: str | None
    total: int
    now_ms: int


def _cursor(score: int, job_id: str) -> str:
    return f"{score}~{job_id}"


def parse_cursor(cursor: str) -> tuple[int, str]:
    score, sep, job_id = cursor.partition("~")
    if not sep:
        raise ValueError(f"not a page cursor: {cursor!r}")
    try:
        return int(score), job_id
    except ValueError:
        raise ValueError(f"not a page cursor: {cursor!r}") from None


@verb
def page(queue: str, state: str, after: str | None = None, count: int = 50) -> Verb[Page]:
    """The ``count`` jobs of ``state`` after cursor ``after`` (``None``: the first page).

    Order: claim order for ``pending``, run-at for ``scheduled``, lease expiry for
    ``active``, newest first for the finished states. The cursor is ``score~id`` of the
    last entry shown: the next page starts just after that id's rank (``ZRANK``, O(log N)),
    or, if the id left the set meanwhile, at its score (``ZCOUNT``, O(log N); jobs tied at
    that score may show again, none is skipped); never an offset walk. Three round trips
    at most, each of a bounded number of commands.
    """
    key = set_key(queue, state)
    guard.positive("count", count)
    count = min(count, PAGE_MAX)
    rev = state in NEWEST_FIRST
    mark = parse_cursor(after) if after is not None else None

    def calls() -> Verb[Page]:
        start = 0
        if mark is not None:
            score, job_id = mark
            rank_cmd = "ZREVRANK" if rev else "ZRANK"
            span = ("(" + str(score), "+inf") if rev else ("-inf", "(" + str(score))
            rank, before = yield Batch((
                Command((rank_cmd, key, job_id)),
                Command(("ZCOUNT", key, *span)),
            ))
            # gone meanwhile: restart at its score (what sorts strictly before it was shown;
            # ties at that score may show again, none is skipped)
            start = int(rank) + 1 if rank is not None else int(before)
        read = "ZREVRANGE" if rev else "ZRANGE"
        members, total, now = yield Batch((
            Command((read, key, start, start + count, "WITHSCORES")),
            Command(("ZCARD", key)),
            Command(("TIME",)),
        ))
        got = [(text(m), score_of(s)) for m, s in scored(members)]
        more = len(got) > count
        got = got[:count]
        entries: list[dict[str, Any]] = []
        if got:
            rows = yield Batch(tuple(
                Command(("HMGET", keyspace.job_key(queue, i), *_ROW_FIELDS)) for i, _ in got
            ))
            for (job_id, score), row in zip(got, rows, strict=True):
                values = dict(zip(_ROW_FIELDS, row if isinstance(row, list) else
                                  [None] * len(_ROW_FIELDS), strict=True))
                task, args = preview(values.pop("payload"))
                entry: dict[str, Any] = {"id": job_id, "score": score, "task": task,
                                         "args": args}
                for k, v in values.items():
                    entry[k] = None if v is None else (
                        whole_or(v) if k in ("attempts", "failures", "delays", "priority")
                        else readings.text_of(v))
                entries.append(entry)
        cursor = _cursor(got[-1][1], got[-1][0]) if more and got else None
        return Page(state, entries, cursor, int(total), time_reply_ms(now))

    return calls()


def folded_cursors(after: str | None, members: list[str]) -> list[str | None]:
    """The per-partition cursors of a folded page's cursor (``None``: a partition already
    listed to its end; ``""``: from its start). ``after`` is what ``merge_pages`` gave."""
    if after is None:
        return [""] * len(members)
    try:
        got = json.loads(after)
    except ValueError:
        raise ValueError(f"not a page cursor: {after!r}") from None
    if (not isinstance(got, list) or len(got) != len(members)
            or not all(c is None or isinstance(c, str) for c in got)):
        raise ValueError(f"not a page cursor: {after!r}")
    for c in got:
        if c:
            parse_cursor(c)
    return got


def merge_pages(state: str, count: int, members: list[str], cursors: list[str | None],
                got: dict[str, Page]) -> Page:
    """One page of a partitioned queue: the ``count`` first jobs of the partitions' pages
    (``got``: each partition's own page after its cursor, at most ``count`` entries) in the
    state's order, each entry naming its partition in ``queue``. The next cursor holds one
    cursor per partition, each just after the last of its jobs shown, so paging on never
    skips or repeats a partition's jobs."""
    rev = state in NEWEST_FIRST
    # ties (every pending job of one priority) go round robin over the partitions, the
    # way workers claim them, so the first page shows each partition
    pool = [(x["score"], rank, i, x) for i, m in enumerate(members) if m in got
            for rank, x in enumerate(got[m].entries)]
    pool.sort(key=lambda t: (-t[0] if rev else t[0], t[1], t[2]))
    shown = [(score, i, x) for score, _, i, x in pool[:count]]
    last: dict[int, dict[str, Any]] = {}
    for _, i, x in shown:
        last[i] = x
    nxt: list[str | None] = []
    for i, m in enumerate(members):
        if m not in got:  # listed to its end already
            nxt.append(None)
            continue
        p = got[m]
        taken = sum(1 for _, j, _ in shown if j == i)
        if taken == len(p.entries) and p.next_cursor is None:
            nxt.append(None)  # every job left in this partition is on this page
        elif i in last:
            nxt.append(_cursor(last[i]["score"], last[i]["id"]))
        else:
            nxt.append(cursors[i])
    entries = [dict(x, queue=members[i]) for _, i, x in shown]
    more = any(c is not None for c in nxt)
    return Page(state, entries, json.dumps(nxt) if more else None,
                sum(p.total for p in got.values()),
                max((p.now_ms for p in got.values()), default=0))
