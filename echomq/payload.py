"""The job payload: a task name with its JSON arguments, as the friendly layer writes it.

``encode(task, args, kwargs)`` is what ``Task.enqueue`` writes, for a verb or a flow
``Node`` written by hand; ``decode`` reads one back.
"""

from __future__ import annotations

from echomq.core.payload import (
    decode,
    encode,
)

__all__ = [
    "decode", "encode",
]
