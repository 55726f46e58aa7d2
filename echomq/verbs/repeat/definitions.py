"""Definitions: the ``Definition`` value (every guard a definition passes, run once, before
any I/O), ``put`` (upsert one as it is), ``register_cron`` and ``upsert`` (make one from
keywords, then write it), and ``definition`` (its stored fields, keyword-only)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Definition:
    """A recurrence definition, checked once (``Definition.of``) and upserted as it is
    (``put``; ``@app.every``/``@app.cron`` and ``echomq repeat add`` make one).

    Fields are in their canonical form: ``start_at``/``end_at`` epoch ms (a naive datetime
    was read in ``tz``), ``cron`` with its whitespace collapsed, ``exclude`` the normalized
    dates and expressions. Units: ``every_ms``, ``window_ms`` and ``jitter_ms`` are ms.
    Pure: no I/O, no clock.
    """

    template: bytes | str
    every_ms: int | None = None
    cron: str | None = None
    tz: str = "UTC"
    start_at: int | None = None
    end_at: int | None = None
    limit: int | None = None
    catchup: str | None = None
    window_ms: int | None = None
    cap: int | None = None
    overlap: str = "allow"
    jitter_ms: int = 0
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, **given: Any) -> Definition:
        """The definition from ``upsert``'s keywords (``template=``, ``every_ms=`` or
        ``cron=``, ``tz=``, ``start_at=``/``end_at=`` as epoch ms or datetimes, ...), every
        guard of ``register_cron``/``upsert`` run here, before any I/O
        (``ValueError``/``TypeError``; an unknown keyword is a ``TypeError``). Reads no
        clock."""
        raw = cls(**given)
        template, every_ms, cron, tz = raw.template, raw.every_ms, raw.cron, raw.tz
        start_at, end_at, limit, catchup = raw.start_at, raw.end_at, raw.limit, raw.catchup
        window_ms, cap, overlap, jitter_ms = raw.window_ms, raw.cap, raw.overlap, raw.jitter_ms
        guard.payload(template, "template")
        if (every_ms is None) == (cron is None):
            raise ValueError("give exactly one cadence: every_ms or cron")
        guard.string("tz", tz)
        zone = cronlib.zone(tz)
        if every_ms is not None:
            guard.span("every_ms", every_ms, minimum=1)
        else:
            guard.string("cron", cron)
            assert cron is not None
            cronlib.parse(cron)
            cron = " ".join(cron.split())
        start = None if start_at is None else instant_in_zone_ms("start_at", start_at, zone)
        end = None if end_at is None else instant_in_zone_ms("end_at", end_at, zone)
        if start is not None and end is not None and end < start:
            raise ValueError("end_at must not be before start_at")
        if limit is not None:
            guard.positive("limit", limit)
        if catchup not in (None, "", *CATCHUP):
            raise ValueError(f"catchup must be one of {', '.join(CATCHUP)} (or None), "
                             f"not {catchup!r}")
        if window_ms is not None:
            if catchup not in ("skip", "all"):
                raise ValueError("window_ms applies to catchup='skip' or catchup='all' only")
            if guard.positive("window_ms", window_ms) > MAX_WINDOW_MS:
                raise ValueError(f"window_ms must be at most {MAX_WINDOW_MS} (31 days)")
        if cap is not None:
            if catchup != "all":
                raise ValueError("cap applies to catchup='all' only")
            if guard.positive("cap", cap) > MAX_CAP:
                raise ValueError(f"cap must be at most {MAX_CAP}")
        if overlap not in OVERLAP:
            raise ValueError(f"overlap must be one of {', '.join(OVERLAP)}, not {overlap!r}")
        if guard.span("jitter_ms", jitter_ms) and every_ms is not None and jitter_ms > every_ms:
            raise ValueError(f"jitter_ms ({jitter_ms}) must not exceed the interval "
                             f"({every_ms} ms): occurrences would overtake each other")
        return replace(raw, cron=cron, tz=tz if cron is not None else "UTC", start_at=start,
                       end_at=end, catchup=catchup or None,
                       exclude=tuple(check_exclude(raw.exclude)))

    def with_template(self, template: bytes | str) -> Definition:
        """This definition firing ``template`` instead (checked)."""
        guard.payload(template, "template")
        return replace(self, template=template)

    def fields(self) -> dict[str, bytes | str]:
        """The definition as the upsert script stores it (``""`` = absent), in
        ``DEFINITION`` order."""
        def opt(value: int | str | None) -> str:
            return "" if value is None else str(value)

        return {
            "every_ms": opt(self.every_ms), "cron": opt(self.cron),
            "tz": self.tz if self.cron is not None else "",
            "template": self.template, "start_at": opt(self.start_at),
            "end_at": opt(self.end_at), "limit": opt(self.limit),
            "catchup": self.catchup or "", "window_ms": opt(self.window_ms),
            "cap": opt(self.cap), "overlap": "" if self.overlap == "allow" else self.overlap,
            "jitter_ms": str(self.jitter_ms) if self.jitter_ms else "",
            "exclude": json.dumps(list(self.exclude), separators=(",", ":"))
            if self.exclude else "",
        }


def definition(**given: Any) -> dict[str, bytes | str]:
    """The canonical definition (``""`` = absent) as the upsert script stores it:
    ``Definition.of(**given).fields()``, keywords only (``template=``, ``every_ms=`` or
    ``cron=``, ...); every guard runs before any I/O."""
    return Definition.of(**given).fields()


def first_run_at(d: Definition, now: int, first_in_ms: int) -> int | None:
    """The first run of a definition registered at HOST ``now``; ``None`` if it has none."""
    return first_run(d.cron, d.tz, d.start_at, d.end_at, now, first_in_ms)


def first_run(cron: str | None, tz: str, start: int | None, end: int | None, now: int,
              first_in_ms: int = 0) -> int | None:
    """The first run (HOST ms) of a cadence armed at ``now``: a ``cron``'s next slot in
    ``tz``, else an interval's ``now + first_in_ms``; never before ``start``; ``None``
    after ``end``. Pure."""
    if cron:
        first = cronlib.next_ms(cron, now if start is None else max(now, start - 1), tz)
    else:
        first = now + first_in_ms
        if start is not None:
            first = max(first, start)
    if end is not None and first > end:
        return None
    return first


def _write(queue: str, name: str, mode: str, d: Definition, first_in_ms: int,
           now: int | None = None) -> Eval:
    first = first_run_at(d, now_ms() if now is None else now, first_in_ms)
    args: list[bytes | str] = [name, mode, "" if first is None else str(first)]
    for field, value in d.fields().items():
        args += [field, value]
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
    d = Definition.of(
        template=template, cron=expression, tz=tz, start_at=start_at, end_at=end_at,
        limit=limit, catchup=catchup, window_ms=window_ms, cap=cap, overlap=overlap,
        jitter_ms=jitter_ms, exclude=exclude)
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
    d = Definition.of(
        template=template, every_ms=every_ms, cron=cron, tz=tz, start_at=start_at,
        end_at=end_at, limit=limit, catchup=catchup, window_ms=window_ms, cap=cap,
        overlap=overlap, jitter_ms=jitter_ms, exclude=exclude)
    return put.steps(queue, name, d, first_in_ms=first_in_ms, now=now)


@verb
def put(queue: str, name: str, spec: Definition, *, first_in_ms: int = 0,
        now: int | None = None) -> Verb[Outcome]:
    """``upsert`` of a definition made (and checked) before: ``"registered"`` |
    ``"exists"`` | ``"updated"``, as ``upsert``. ``first_in_ms``: an interval's first run
    is HOST now (or ``now``) + it."""
    entry_keys(queue, name)
    if not isinstance(spec, Definition):
        raise TypeError(f"spec must be a repeat.Definition, not {type(spec).__name__}")
    guard.span("first_in_ms", first_in_ms)
    if spec.cron is not None and first_in_ms:
        raise ValueError("first_in_ms applies to every_ms registrations; cron runs on its slots")
    step = _write(queue, name, "upsert", spec, first_in_ms,
                  None if now is None else guard.instant("now", now))
    return single(step, lambda r: _WRITTEN[int(r)])
