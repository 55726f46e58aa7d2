"""The hot path's hand-backs, remembered a while: a queue whose ``EMQ.CLAIM``, ``EMQ.ACK`` or
``EMQ.ACKMANY`` just handed a call back to its script (``EMQSTATE ... not native``: groups
in the ring, a queue rate, a grouped or flow job's ack) sends that script straight away for
the next ``HOLD_S`` seconds instead of paying a refused native call first, then tries the
native command again (the groups may be gone by then). Only a cost: the script gives the
same answer either way. Process-wide, keyed by command and queue (its hash tag).

Clock: HOST monotonic.
"""

from __future__ import annotations

import time
from dataclasses import replace

from echomq.core.steps import Eval

HOLD_S = 1.0
_MAX = 10_000  # queues remembered at most (a process that sees more starts over)
_until: dict[tuple[str, str], float] = {}


def _key(step: Eval) -> tuple[str, str] | None:
    if step.native is None or not step.keys:
        return None
    key = step.keys[0]
    lo, hi = key.find("{"), key.find("}")
    return step.native, key[lo:hi + 1] if 0 <= lo < hi else key


def gate(step: Eval) -> Eval:
    """``step``, or its script alone (no native command) while its queue's command handed
    back within the last ``HOLD_S`` seconds."""
    key = _key(step)
    if key is None or not _until:
        return step
    until = _until.get(key)
    if until is None:
        return step
    if time.monotonic() < until:
        return replace(step, native=None)
    del _until[key]
    return step


def note(step: Eval) -> None:
    """``step``'s native command handed back: send its script for a while."""
    key = _key(step)
    if key is None:
        return
    if len(_until) >= _MAX:
        _until.clear()
    _until[key] = time.monotonic() + HOLD_S


def forget() -> None:
    """Remember no hand-back (tests)."""
    _until.clear()
