"""Lists in a log line: a worker on 1,000 queues says how many and names a few, not all
of them (one line a person reads, not a screenful). No I/O, no clock."""

from __future__ import annotations

from collections.abc import Sequence

#: how many names a summarised list shows before "and N more"
SHOWN = 5


def few(names: Sequence[str], shown: int = SHOWN) -> str:
    """``"a, b, c"``; past ``shown`` names, the first ones and ``"and N more"``."""
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head} and {len(names) - shown} more"
