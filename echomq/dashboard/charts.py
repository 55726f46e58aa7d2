"""SVG drawn on the server: sparklines, the backoff curve, the schedule clock.

Pure functions from numbers to SVG text (no I/O, no clock): the pages read the same with
scripts off, and the few lines of script only move the schedule clock's "now" handle.
Styling comes from classes in the stylesheet (the CSP allows no inline styles).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from echomq.core import backoff
from echomq.dashboard.web import e

DASH = "\u2013"  # an en dash: the mark for "no value"
NONE = DASH


def sparkline(values: Sequence[int], cls: str, width: int = 120, height: int = 26,
              label: str = "") -> str:
    """A polyline of ``values`` (oldest first) scaled to its own maximum."""
    if not values:
        return ""
    top = max(values) or 1
    step = width / max(1, len(values) - 1)
    pts = " ".join(
        f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}" for i, v in enumerate(values)
    )
    total = sum(values)
    title = f"{label}: {total} in the last hour, peak {max(values)}/min" if label else ""
    return (
        f"<svg class='spark {cls}' width='{width}' height='{height}' viewBox='0 0 {width} "
        f"{height}' role='img' aria-label='{e(title)}'><title>{e(title)}</title>"
        f"<polyline points='{pts}'/></svg>"
    )


def duration(ms: float | None) -> str:
    """``1h 02m``, ``3.2 s``, ``250 ms``: a span for people."""
    if ms is None:
        return NONE
    neg = ms < 0
    ms = abs(ms)
    if ms < 1000:
        out = f"{ms:.0f} ms"
    elif ms < 60_000:
        out = f"{ms / 1000:.1f} s"
    elif ms < 3_600_000:
        out = f"{int(ms // 60_000)}m {int(ms % 60_000 // 1000):02d}s"
    elif ms < 86_400_000:
        out = f"{int(ms // 3_600_000)}h {int(ms % 3_600_000 // 60_000):02d}m"
    else:
        out = f"{int(ms // 86_400_000)}d {int(ms % 86_400_000 // 3_600_000):02d}h"
    return ("-" if neg else "") + out


@dataclass(frozen=True, slots=True)
class Curve:
    """Delays before each retry under a policy: ``rows`` of (attempt, low ms, high ms,
    cumulative high ms); a job dead-letters at attempt ``max_attempts``."""

    policy: backoff.Policy
    max_attempts: int
    rows: list[tuple[int, int, int, int]]

    @property
    def total_ms(self) -> int:
        return self.rows[-1][3] if self.rows else 0

    @property
    def total_low_ms(self) -> int:
        return sum(r[1] for r in self.rows)


def _bound(policy: backoff.Policy, attempts: int) -> tuple[int, int]:
    """The (low, high) delay of attempt ``attempts``: jitter draws in 0..inner."""
    if policy[0] == "jitter":
        return 0, _bound(policy[1], attempts)[1]
    d = backoff.delay_ms(policy, attempts)
    return d, d


def curve(policy: backoff.Policy, max_attempts: int) -> Curve:
    """The retry delays after attempts 1..max_attempts-1 (the last attempt dead-letters)."""
    backoff.validate(policy)
    rows, total = [], 0
    for attempt in range(1, max_attempts):
        low, high = _bound(policy, attempt)
        total += high
        rows.append((attempt, low, high, total))
    return Curve(policy, max_attempts, rows)


def _grid(pad_l: float, pad_t: float, w: float, h: float, left: Callable[[float], str],
          right: Callable[[float], str]) -> list[str]:
    """Grid lines at 0, half and the top of a two-axis chart, each labelled on the left and
    on the right axis (``left(frac)``, ``right(frac)``: already escaped)."""
    out = []
    for frac in (0, 0.5, 1):
        y = pad_t + h - frac * h
        out.append(f"<line class='grid' x1='{pad_l}' x2='{pad_l + w}' y1='{y:.1f}' "
                   f"y2='{y:.1f}'/><text class='axis' x='{pad_l - 6}' y='{y + 4:.1f}' "
                   f"text-anchor='end'>{left(frac)}</text><text class='axis cum' "
                   f"x='{pad_l + w + 6}' y='{y + 4:.1f}'>{right(frac)}</text>")
    return out


def curve_svg(c: Curve, width: int = 640, height: int = 260) -> str:
    """Bars of each retry's delay (a band for jitter) and the cumulative time as a line."""
    pad_l, pad_b, pad_t, pad_r = 56, 28, 12, 56
    w, h = width - pad_l - pad_r, height - pad_b - pad_t
    if not c.rows:
        return (f"<svg class='curve' width='{width}' height='{height}' role='img'>"
                f"<text x='{pad_l}' y='{height // 2}'>no retries: the first failure is final"
                "</text></svg>")
    top = max(r[2] for r in c.rows) or 1
    cum_top = c.total_ms or 1
    n = len(c.rows)
    bw = w / n
    parts = [f"<svg class='curve' width='{width}' height='{height}' viewBox='0 0 {width} "
             f"{height}' role='img' aria-label='backoff curve'>"]
    parts.extend(_grid(pad_l, pad_t, w, h, lambda f: e(duration(top * f)),
                       lambda f: e(duration(cum_top * f))))
    pts = []
    for i, (attempt, low, high, cum) in enumerate(c.rows):
        x = pad_l + i * bw + bw * 0.15
        bh = high / top * h
        lh = low / top * h
        cls = "bar band" if low != high else "bar"
        parts.append(
            f"<rect class='{cls}' x='{x:.1f}' y='{pad_t + h - bh:.1f}' width='{bw * 0.7:.1f}' "
            f"height='{max(bh, 0.5):.1f}'><title>retry after attempt {attempt}: "
            f"{e(duration(low) if low != high else duration(high))}"
            f"{' to ' + e(duration(high)) if low != high else ''}</title></rect>")
        if low != high and lh > 0:
            parts.append(f"<rect class='bar' x='{x:.1f}' y='{pad_t + h - lh:.1f}' "
                         f"width='{bw * 0.7:.1f}' height='{lh:.1f}'/>")
        if n <= 30 or attempt % max(1, n // 15) == 0:
            parts.append(f"<text class='axis' x='{x + bw * 0.35:.1f}' y='{height - 10}' "
                         f"text-anchor='middle'>{attempt}</text>")
        pts.append(f"{pad_l + (i + 0.5) * bw:.1f},{pad_t + h - cum / cum_top * h:.1f}")
    parts.append(f"<polyline class='cumline' points='{' '.join(pts)}'/>")
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class ClockFrame:
    """The schedule clock's time window (SERVER ms) and drawing size."""

    start: int
    end: int
    width: int = 1200
    height: int = 150

    def x(self, ms: int) -> float:
        span = max(1, self.end - self.start)
        return 10 + (ms - self.start) / span * (self.width - 20)


def clock_frame(now_ms: int, run_ats: Sequence[int]) -> ClockFrame:
    """A window from a little before the earliest of now and the first run-at to a little
    after the last run-at shown (at least a minute past now)."""
    lo = min([now_ms, *run_ats[:1]])
    hi = max([now_ms + 60_000, *run_ats[-1:]])
    pad = max(1000, (hi - lo) // 20)
    return ClockFrame(lo - pad, hi + pad)


def clock_svg(frame: ClockFrame, run_ats: Sequence[int], now_ms: int, at_ms: int) -> str:
    """Scheduled jobs as a histogram along the window, the SERVER now, and the draggable
    "release at" handle at ``at_ms`` (its data attributes carry the window for the
    script)."""
    bins = 150
    span = max(1, frame.end - frame.start)
    counts = [0] * bins
    for ms in run_ats:
        i = min(bins - 1, max(0, int((ms - frame.start) / span * bins)))
        counts[i] += 1
    top = max(counts) or 1
    base_y = frame.height - 34
    bar_w = (frame.width - 20) / bins
    parts = [
        f"<svg id='clock' class='clock' width='{frame.width}' height='{frame.height}' "
        f"viewBox='0 0 {frame.width} {frame.height}' data-start='{frame.start}' "
        f"data-end='{frame.end}' data-now='{now_ms}' data-at='{at_ms}' role='img' "
        "aria-label='schedule clock'>",
        f"<line class='axisline' x1='10' x2='{frame.width - 10}' y1='{base_y}' y2='{base_y}'/>",
    ]
    for i, n in enumerate(counts):
        if n:
            bh = 6 + (n / top) * (base_y - 26)
            x = 10 + i * bar_w
            due = frame.start + (i + 1) * span / bins <= at_ms
            parts.append(f"<rect class='job{' due' if due else ''}' data-i='{i}' x='{x:.1f}' "
                         f"y='{base_y - bh:.1f}' width='{max(bar_w - 1, 1):.1f}' "
                         f"height='{bh:.1f}'><title>{n} job(s)</title></rect>")
    for k in range(0, 6):
        ms = frame.start + span * k // 5
        x = frame.x(ms)
        rel = duration(ms - now_ms)
        anchor = "start" if k == 0 else "end" if k == 5 else "middle"
        parts.append(f"<text class='axis' x='{x:.1f}' y='{frame.height - 16}' "
                     f"text-anchor='{anchor}'>{e(('+' if ms >= now_ms else '') + rel)}</text>")
    nx = frame.x(now_ms)
    parts.append(f"<line class='servernow' x1='{nx:.1f}' x2='{nx:.1f}' y1='8' "
                 f"y2='{base_y + 4}'/><text class='axis' x='{nx + 4:.1f}' y='18'>server now"
                 "</text>")
    ax = frame.x(at_ms)
    parts.append(
        f"<g id='handle' class='handle' transform='translate({ax:.1f},0)' tabindex='0' "
        "role='slider' aria-label='release at'>"
        f"<rect class='hitbox' x='-10' y='0' width='20' height='{base_y + 8}'/>"
        f"<line x1='0' x2='0' y1='4' y2='{base_y + 8}'/>"
        f"<circle cx='0' cy='{base_y + 8}' r='7'/></g>")
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Step:
    """One bar of a task chart: runs that ended well (completed, cancelled) and failed
    (retried, dead, timed out), and the run time's p50 / p95 in seconds (``None``: no
    run)."""

    label: str
    ok: int
    failed: int
    p50_s: float | None
    p95_s: float | None


def task_svg(steps: Sequence[Step], title: str, width: int = 640, height: int = 200) -> str:
    """Stacked bars of runs per step (ok below, failed above) on the left axis, and the
    run time's p50 and p95 as lines on the right axis (seconds)."""
    pad_l, pad_b, pad_t, pad_r = 44, 24, 10, 56
    w, h = width - pad_l - pad_r, height - pad_b - pad_t
    top = max([s.ok + s.failed for s in steps] + [1])
    slow = max([s.p95_s or 0.0 for s in steps] + [s.p50_s or 0.0 for s in steps] + [0.0])
    slow = slow or 1.0
    n = max(1, len(steps))
    bw = w / n
    parts = [f"<svg class='taskchart' width='{width}' height='{height}' viewBox='0 0 "
             f"{width} {height}' role='img' aria-label='{e(title)}'><title>{e(title)}</title>"]
    parts.extend(_grid(pad_l, pad_t, w, h, lambda f: f"{top * f:.3g}",
                       lambda f: e(duration(slow * f * 1000))))
    lines: dict[str, list[str]] = {"p50": [], "p95": []}
    for i, s in enumerate(steps):
        x = pad_l + i * bw
        oh = s.ok / top * h
        fh = s.failed / top * h
        tip = (f"{s.label}: {s.ok} ok, {s.failed} failed; p50 {duration(_ms(s.p50_s))}, "
               f"p95 {duration(_ms(s.p95_s))}")
        if s.ok:
            parts.append(f"<rect class='okbar' x='{x + bw * 0.1:.1f}' y='{pad_t + h - oh:.1f}' "
                         f"width='{max(bw * 0.8, 0.6):.1f}' height='{oh:.1f}'><title>{e(tip)}"
                         "</title></rect>")
        if s.failed:
            parts.append(f"<rect class='failbar' x='{x + bw * 0.1:.1f}' "
                         f"y='{pad_t + h - oh - fh:.1f}' width='{max(bw * 0.8, 0.6):.1f}' "
                         f"height='{fh:.1f}'><title>{e(tip)}</title></rect>")
        for key, v in (("p50", s.p50_s), ("p95", s.p95_s)):
            if v is not None:
                lines[key].append(f"{x + bw / 2:.1f},{pad_t + h - v / slow * h:.1f}")
    for key, pts in lines.items():
        if len(pts) == 1:
            cx, cy = pts[0].split(",")
            parts.append(f"<circle class='{key}' cx='{cx}' cy='{cy}' r='2.5'/>")
        elif pts:
            parts.append(f"<polyline class='{key}' points='{' '.join(pts)}'/>")
    ticks = max(1, n // 6)
    for i, s in enumerate(steps):
        if i % ticks == 0 or i == n - 1:
            parts.append(f"<text class='axis' x='{pad_l + (i + 0.5) * bw:.1f}' "
                         f"y='{height - 8}' text-anchor='middle'>{e(s.label)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000
