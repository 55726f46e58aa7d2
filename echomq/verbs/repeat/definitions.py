"""Definitions: ``register_cron`` and ``upsert`` and the guards every definition passes
before any I/O (``definition``, public for the CLI)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from echomq.core import cron as cronlib
from echomq.core import guards as guard
from echomq.core.outcomes import Outcome
from echomq.core.recurrence import check_exclude
from echomq.core.steps import Eval, Verb, single, verb
from echomq.core.times import instant_in_zone_ms
from echomq.verbs.repeat.entries import entry_keys, now_ms

# -- definitions: register_cron and upsert ------------------------------------------------

CATCHUP = ("skip", "latest", "all")
#: what an occurrence due while the last one is still live (waiting, running or retrying)
#: does, Temporal's meanings: start anyway, skip it, start it once the live one ends
#: (buffering one, or every one, in order), or cancel the live one and start when it ended
OVERLAP = ("allow", "skip", "buffer_one", "buffer_all", "cancel_other")
MAX_WINDOW_MS = 31 * 86_400_000
MAX_CAP = 1_000
# The definition, in the order the upsert script compares it; runtime fields are not here.
DEFINITION = (
    "every_ms", "cron", "tz", "template", "start_at", "end_at",
    "limit", "catchup", "window_ms", "cap", "overlap", "jitter_ms", "exclude",
)  # fmt: skip


def definition(
    template: bytes | str,
    every_ms: int | None,
    cron: str | None,
    tz: str,
    start_at: int | datetime | None,
    end_at: int | datetime | None,
    limit: int | None,
    catchup: str | None,
    window_ms: int | None,
    cap: int | None,
    overlap: str,
    jitter_ms: int = 0,
    exclude: Iterable[Any] = (),
) -> dict[str, bytes | str]:
    """The canonical definition (``""`` = absent) as the upsert script stores it.

    Every guard of ``register_cron``/``upsert`` runs here, before any I/O, so a caller (the
    CLI) can refuse a bad definition before it connects. Reads no clock.
    """
    guard.payload(template, "template")
    if (every_ms is None) == (cron is None):
        raise ValueError("give exactly one cadence: every_ms or cron")
    guard.string("tz", tz)
    cronlib.zone(tz)
    d: dict[str, bytes | str] = dict.fromkeys(DEFINITION, "")
    d["template"] = template
    if every_ms is not None:
        d["every_ms"] = str(guard.span("every_ms", every_ms, minimum=1))
    else:
        guard.string("cron", cron)
        assert cron is not None
        cronlib.parse(cron)
        d["cron"] = " ".join(cron.split())
        d["tz"] = tz
    start = None if start_at is None else instant_in_zone_ms("start_at", start_at, cronlib.zone(tz))
    end = None if end_at is None else instant_in_zone_ms("end_at", end_at, cronlib.zone(tz))
    if start is not None and end is not None and end < start:
        raise ValueError("end_at must not be before start_at")
    d["start_at"] = "" if start is None else str(start)
    d["end_at"] = "" if end is None else str(end)
    if limit is not None:
        d["limit"] = str(guard.positive("limit", limit))
    if catchup not in (None, "", *CATCHUP):
        raise ValueError(f"catchup must be one of {', '.join(CATCHUP)} (or None), not {catchup!r}")
    d["catchup"] = catchup or ""
    if window_ms is not None:
        if catchup not in ("skip", "all"):
            raise ValueError("window_ms applies to catchup='skip' or catchup='all' only")
        if guard.positive("window_ms", window_ms) > MAX_WINDOW_MS:
            raise ValueError(f"window_ms must be at most {MAX_WINDOW_MS} (31 days)")
        d["window_ms"] = str(window_ms)
    if cap is not None:
        if catchup != "all":
            raise ValueError("cap applies to catchup='all' only")
        if guard.positive("cap", cap) > MAX_CAP:
            raise ValueError(f"cap must be at most {MAX_CAP}")
        d["cap"] = str(cap)
    if overlap not in OVERLAP:
        raise ValueError(f"overlap must be one of {', '.join(OVERLAP)}, not {overlap!r}")
    d["overlap"] = "" if overlap == "allow" else overlap
    if guard.span("jitter_ms", jitter_ms):
        if every_ms is not None and jitter_ms > every_ms:
            raise ValueError(f"jitter_ms ({jitter_ms}) must not exceed the interval "
                             f"({every_ms} ms): occurrences would overtake each other")
        d["jitter_ms"] = str(jitter_ms)
    rules = check_exclude(exclude)
    d["exclude"] = json.dumps(rules, separators=(",", ":")) if rules else ""
    return d


def first_run_at(d: dict[str, bytes | str], now: int, first_in_ms: int) -> int | None:
    """The first run of a definition registered at HOST ``now``; ``None`` if it has none."""
    start = int(d["start_at"]) if d["start_at"] else None
    if d["cron"]:
        after = now if start is None else max(now, start - 1)
        first = cronlib.next_ms(str(d["cron"]), after, str(d["tz"]))
    else:
        first = now + first_in_ms
        if start is not None:
            first = max(first, start)
    if d["end_at"] and first > int(d["end_at"]):
        return None
    return first


def _write(
    queue: str, name: str, mode: str, d: dict[str, bytes | str], first_in_ms: int,
    now: int | None = None,
) -> Eval:
    first = first_run_at(d, now_ms() if now is None else now, first_in_ms)
    args: list[bytes | str] = [name, mode, "" if first is None else str(first)]
    for field in DEFINITION:
        args += [field, d[field]]
    return Eval("upsert", entry_keys(queue, name), tuple(args))


_WRITTEN = {0: Outcome.EXISTS, 1: Outcome.REGISTERED, 2: Outcome.UPDATED}


@verb
def register_cron(
    queue: str,
    name: str,
    expression: str,
    template: bytes | str,
    tz: str = "UTC",
    start_at: int | datetime | None = None,
    end_at: int | datetime | None = None,
    limit: int | None = None,
    *,
    catchup: str | None = None,
    window_ms: int | None = None,
    cap: int | None = None,
    overlap: str = "allow",
    jitter_ms: int = 0,
    exclude: Iterable[Any] = (),
) -> Verb[Outcome]:
    """Register ``name`` on a cron ``expression`` read in the IANA zone ``tz``.

    The first run is the first cron instant after HOST now (and at or after ``start_at``);
    no run falls after ``end_at``; ``limit`` caps the number of occurrences. ``start_at``
    and ``end_at`` are epoch ms or datetimes (naive ones read in ``tz``). The record stores
    the expression and the zone. ``"registered"``, or ``"exists"`` when a record has that
    name (nothing written: changing a definition is ``upsert``'s job).
    """
    entry_keys(queue, name)
    d = definition(
        template, None, expression, tz, start_at, end_at, limit, catchup, window_ms, cap,
        overlap, jitter_ms, exclude,
    )
    return single(_write(queue, name, "register", d, 0), lambda r: _WRITTEN[int(r)])


@verb
def upsert(
    queue: str,
    name: str,
    *,
    template: bytes | str,
    every_ms: int | None = None,
    cron: str | None = None,
    tz: str = "UTC",
    first_in_ms: int = 0,
    start_at: int | datetime | None = None,
    end_at: int | datetime | None = None,
    limit: int | None = None,
    catchup: str | None = None,
    window_ms: int | None = None,
    cap: int | None = None,
    overlap: str = "allow",
    jitter_ms: int = 0,
    exclude: Iterable[Any] = (),
    now: int | None = None,
) -> Verb[Outcome]:
    """Register ``name``, or update it explicitly: ``"registered"`` | ``"exists"`` | ``"updated"``.

    Exactly one cadence: ``every_ms`` (first run HOST now + ``first_in_ms``) or ``cron`` in
    zone ``tz``. ``"exists"``: the record holds this very definition (nothing written; a
    record that lost its registry member is armed again, so re-registering heals).
    ``"updated"``: the definition changed; it is rewritten in place, the occurrence count
    and last occurrence are kept, and the next run is re-priced from HOST now only when a
    timing field (cadence, zone, start, end) changed. Two callers racing with the same
    definition both get a non-destructive answer; nothing is ever deleted by an upsert.

    Missed runs (``catchup``): ``None`` (the default, as ``advance``) fires one occurrence
    for a late due period, then measures the next from now (interval) or the next cron slot;
    ``"latest"`` fires one and stays on the grid; ``"skip"`` fires only if the latest slot
    is at most ``window_ms`` old (default 60 s); ``"all"`` fires every missed slot within
    ``window_ms`` (default one day), each its own occurrence, at most ``cap`` (default 100,
    the newest).

    ``overlap`` (Temporal's policies), when a slot comes due while the last occurrence is
    still live (pending, scheduled or retrying, active): ``"allow"`` starts it anyway;
    ``"skip"`` passes the slot; ``"buffer_one"`` starts it as soon as the live one ends,
    holding at most one (further slots while one waits are passed); ``"buffer_all"`` holds
    every such slot and runs them one after another; ``"cancel_other"`` cancels the live
    one (a running one at its next lease checkpoint) and starts the new one once it ended.
    ``jitter_ms``: each occurrence's run-at moves by a deterministic amount in ``[0,
    jitter_ms)`` (``recurrence.jitter_offset`` of the name and the slot: every Pump
    agrees). ``exclude``: dates and/or cron expressions whose matching slots do not fire
    (read in ``tz``). ``now`` (HOST ms by default): the instant the first run is priced
    from (an app on the server's clock passes the server's).
    """
    entry_keys(queue, name)
    guard.span("first_in_ms", first_in_ms)
    if cron is not None and first_in_ms:
        raise ValueError("first_in_ms applies to every_ms registrations; cron runs on its slots")
    d = definition(
        template, every_ms, cron, tz, start_at, end_at, limit, catchup, window_ms, cap,
        overlap, jitter_ms, exclude,
    )
    step = _write(queue, name, "upsert", d, first_in_ms,
                  None if now is None else guard.instant("now", now))
    return single(step, lambda r: _WRITTEN[int(r)])
