"""The job page's failure section: the last error with its traceback, and the history of
the last failures (``App(keep_errors=N)``), newest first, each with its time (SERVER ms,
shown as UTC and in the browser's zone), run, error and traceback (folded: ``<details>``,
readable with scripts off). Pure: it draws the row the route read, nothing else.
"""

from __future__ import annotations

from typing import Any

from echomq.dashboard.layout import when
from echomq.dashboard.web import e
from echomq.verbs.status import history

#: the row fields this section draws (the facts table leaves them out)
FIELDS = frozenset({"error", "traceback", "errors"})


def failure_section(row: dict[str, Any], now_ms: int | None) -> str:
    """The last error and its traceback, then the kept failures (``""`` for none)."""
    err, tb = row.get("error"), row.get("traceback")
    out = ""
    if err:
        out += f"<h2>Last error</h2><pre class='error'>{e(err)}</pre>"
    if tb:
        out += f"<h3>Traceback</h3><pre class='error traceback'>{e(tb)}</pre>"
    kept = history(row.get("errors"))
    if kept:
        items = "".join(
            f"<li><details><summary>run {e(f.get('run'))} · {when(f.get('at_ms'), now_ms)}"
            f" · <span class='err'>{e(f.get('error') or '')}</span></summary>"
            f"<pre class='error traceback'>{e(f.get('traceback') or 'no traceback kept')}"
            "</pre></details></li>"
            for f in reversed(kept))
        out += (f"<h3>Failures ({len(kept)} kept, newest first)</h3>"
                f"<ol class='failures'>{items}</ol>")
    return out
