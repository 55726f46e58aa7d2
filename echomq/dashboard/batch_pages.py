"""The batch page (``/batch/<id>``): a batch's progress (``app.batch``): its members
ended of enrolled as a bar, the counts, open or closed, and the callbacks fired."""

from __future__ import annotations

from echomq.dashboard.layout import shell
from echomq.dashboard.web import Request, e
from echomq.verbs.batches import BatchInfo


def batch_page(req: Request, batch_id: str, info: BatchInfo, fired: list[str]) -> str:
    done = info.total - info.pending
    cancelled = done - info.completed - info.dead
    share = 100 * done / info.total if info.total else 100.0
    cells = "".join(
        f"<tr><th>{name}</th><td class='n' data-count='{name}'>{value:,}</td></tr>"
        for name, value in (("total", info.total), ("pending", info.pending),
                            ("completed", info.completed), ("dead", info.dead),
                            ("cancelled", cancelled)))
    body = (
        f"<p class='batch-progress'>{done:,} of {info.total:,} members ended "
        f"({share:.0f}%), {'closed' if info.closed else 'open: its block still runs'}.</p>"
        f"<progress max='{max(info.total, 1)}' value='{done}'></progress>"
        f"<table class='grid batch'><tbody>{cells}</tbody></table>"
        f"<p>Callbacks fired: <span class='fired'>{e(', '.join(fired) or 'none yet')}"
        "</span></p><p class='hint'>on_death fires at the first dead member, on_complete "
        "when every member ended, on_success when every member completed; none while the "
        "batch is open.</p>")
    return shell(req, f"Batch {batch_id}", body)
