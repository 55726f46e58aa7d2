"""The schedule's pages: the schedule clock (what a promote at an instant would release)
and a queue's registrations with their next runs, drawn on the server as HTML.

Times: the clock's run-ats are SERVER ms, shown in UTC (and the browser's zone); a
registration's runs are HOST ms (the registry's clock), shown in its own zone. What they
draw is read by the routes (``router``): these only render.
"""

from __future__ import annotations

from datetime import datetime

from echomq.core import cron
from echomq.dashboard import charts, insight
from echomq.dashboard.access import Access
from echomq.dashboard.charts import duration
from echomq.dashboard.layout import crumbs, post_form, shell, utc, when
from echomq.dashboard.web import Request, e, q
from echomq.verbs import repeat

__all__ = ["clock_page", "repeat_page"]


# -- the schedule clock -----------------------------------------------------------------

def clock_page(req: Request, queue: str, tl: insight.Timeline, rel: insight.Release) -> str:
    qq = q(queue)
    run_ats = [s for _, s in tl.entries]
    frame = charts.clock_frame(tl.now_ms, run_ats)
    svg = charts.clock_svg(frame, run_ats, tl.now_ms, rel.at_ms)
    first = "".join(
        f"<li><a href='{e(req.url(f'/q/{qq}/job/{q(i)}'))}'><code>{e(i)}</code></a> "
        f"{when(s, tl.now_ms)}</li>" for i, s in rel.first)
    more = rel.count - len(rel.first)
    shown = (f"the soonest {len(tl.entries):,} of {tl.total:,} scheduled jobs"
             if tl.total > len(tl.entries) else f"all {tl.total:,} scheduled jobs")
    offset = rel.at_ms - tl.now_ms
    body = (
        "<p class='hint'>Each bar is scheduled jobs by run-at. Drag the handle (or use the "
        "arrow keys on it) to ask: <em>if a promote ran at this instant, on the server's "
        f"clock, what would it release?</em> Drawn: {shown}.</p>"
        f"<div class='clockbox' data-queue='{e(queue)}' "
        f"data-api='{e(req.url(f'/api/q/{qq}/release'))}'>{svg}</div>"
        "<div class='release'><div class='big'><span id='release-count'>"
        f"{rel.count:,}</span></div><div>job(s) would be released by a promote at "
        f"<span id='release-at'>{when(rel.at_ms, tl.now_ms)}</span> "
        f"(<span id='release-offset'>{e(('+' if offset >= 0 else '-') + duration(abs(offset)))}"
        "</span> from server now)</div></div>"
        f"<ol id='release-list' class='ids'>{first}</ol>"
        f"<p id='release-more' class='muted'>"
        f"{'and ' + format(more, ',') + ' more' if more > 0 else ''}</p>"
        f"<form method='get' action='{e(req.url(f'/q/{qq}/clock'))}' class='nojs'>"
        "<label>release at (server ms) <input name='at' type='number' "
        f"value='{rel.at_ms}'></label> <button class='ghost'>ask</button></form>"
    )
    return shell(req, f"{queue}: schedule clock", body, crumbs(req, queue, "schedule clock"),
                 tl.now_ms)


# -- registrations ------------------------------------------------------------------------

def repeat_page(req: Request, queue: str, regs: list[repeat.Registration], access: Access) -> str:
    rows = []
    for entry in regs:
        cadence = entry.get("cron") or f"every {duration(entry.get('every_ms') or 0)}"
        zone = entry.get("tz") or "UTC"
        try:
            upcoming = "".join(_preview_item(entry, s) for s in repeat.preview(entry, 5))
        except (ValueError, KeyError, TypeError) as exc:
            upcoming = f"<li class='error'>{e(exc)}</li>"
        name = q(entry["name"])
        op = "resume" if entry.get("paused") else "pause"
        acts = "" if access.read_only else (
            post_form(req, f"/q/{q(queue)}/repeat/{name}/run", "run now", "small")
            + post_form(req, f"/q/{q(queue)}/repeat/{name}/{op}", op, "small ghost")
            + post_form(req, f"/q/{q(queue)}/repeat/{name}/cancel", "cancel", "danger small",
                    f"Cancel the registration {entry['name']}?")
            + _backfill_form(req, queue, entry["name"]))
        until = entry.paused_until
        badge = ((" <span class='badge paused'>paused until "
                  f"{e(utc(until))}</span>") if until is not None else
                 " <span class='badge paused'>paused</span>") if entry.get("paused") else ""
        steer = [f"overlap {entry.overlap}"]
        if entry.jitter_ms:
            steer.append(f"jitter {duration(entry.jitter_ms)}")
        if entry.exclude:
            steer.append("except " + ", ".join(entry.exclude))
        rows.append(
            f"<tr><td><b>{e(entry['name'])}</b>{badge}</td><td><code>{e(cadence)}</code>"
            f"<div class='hint'>{e('; '.join(steer))}</div></td>"
            f"<td>{e(zone)}</td><td><ol class='runs'>{upcoming}</ol></td>"
            f"<td class='n'>{e(entry.get('fired', 0))}</td><td>{acts}</td></tr>")
    table = (
        "<table class='grid'><thead><tr><th>name</th><th>cadence</th><th>zone</th>"
        "<th>next 5 runs (in its zone)</th><th class='n'>fired</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>" if rows else
        "<p class='note'>No registrations on this queue.</p>")
    return shell(req, f"{queue}: registrations", table, crumbs(req, queue, "registrations"))


def _preview_item(entry: repeat.Registration, slot: repeat.Slot) -> str:
    """One run of the preview, in the registration's zone: an excluded one struck through,
    a jittered one with the run-at its occurrence gets."""
    zone = cron.zone(entry.get("tz") or "UTC")

    def shown(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S %Z")

    if slot.excluded:
        return f"<li class='excluded'><s>{e(shown(slot.slot))}</s> excluded</li>"
    if slot.run_at != slot.slot:
        return (f"<li>{e(shown(slot.slot))} <span class='hint'>runs "
                f"{e(shown(slot.run_at))}</span></li>")
    return f"<li>{e(shown(slot.slot))}</li>"


def _backfill_form(req: Request, queue: str, name: str) -> str:
    """Backfill a past range (UTC datetimes): the slots in it not fired before."""
    action = req.url(f"/q/{q(queue)}/repeat/{q(name)}/backfill")
    return (f"<form method='post' action='{e(action)}' class='inline backfill'>"
            "<input type='datetime-local' name='from' required aria-label='from (UTC)'>"
            "<input type='datetime-local' name='to' required aria-label='to (UTC)'>"
            "<button class='small ghost'>backfill</button></form>")
