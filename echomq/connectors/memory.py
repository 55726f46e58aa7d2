"""What a connector remembers about its own traffic, so the verbs it drives remember nothing.

Two memories, each owned by one connector (two connectors share none of it; a dropped
connector takes its memory with it):

- ``HandBacks``: a queue whose ``EMQ.CLAIM``, ``EMQ.ACK`` or ``EMQ.ACKMANY`` just handed a
  call back to its script (``EMQSTATE ... not native``: a queue rate, an odd row, a flow
  job's ack) gets that script straight away for the next ``hold_s`` seconds
  instead of paying a refused native call first; then the native command is tried again.
  Only a cost: the script gives the same answer either way. Keyed by command and queue
  (its hash tag). Clock: HOST monotonic, read here.
- ``registered``: the queue names already added to the queue registry through this
  connector (``verbs.registry.note``), so the hot path sends that ``SADD`` once. No clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from echomq.core import errors
from echomq.core.steps import Eval, not_native

#: the native commands whose hand-backs are remembered: the verbs that send them retry a
#: hand-back as the script (``steps.native_or_script``), so sending the script first is the
#: same answer; another command's refusal is its caller's to handle
REMEMBERED = frozenset({"EMQ.CLAIM", "EMQ.ACK", "EMQ.ACKMANY"})
HOLD_S = 1.0
MAX_QUEUES = 10_000  # queues remembered at most (a connector that sees more starts over)


def _key(step: Eval) -> tuple[str, str] | None:
    if step.native not in REMEMBERED or not step.keys:
        return None
    key = step.keys[0]
    lo, hi = key.find("{"), key.find("}")
    return step.native, key[lo:hi + 1] if 0 <= lo < hi else key


@dataclass(slots=True)
class HandBacks:
    """The queues whose native command handed back lately, and until when (HOST
    monotonic seconds)."""

    hold_s: float = HOLD_S
    until: dict[tuple[str, str], float] = field(default_factory=dict)

    def scripted(self, step: Eval) -> bool:
        """Whether ``step`` goes as its script: its queue's command handed back within the
        last ``hold_s`` seconds."""
        if not self.until:
            return False
        key = _key(step)
        if key is None:
            return False
        until = self.until.get(key)
        if until is None:
            return False
        if time.monotonic() < until:
            return True
        del self.until[key]
        return False

    def saw(self, step: Eval, reply: object) -> None:
        """Note ``reply`` (a reply or a mapped refusal) to ``step`` as sent natively: a
        hand-back sends its script for a while."""
        if not isinstance(reply, errors.StateError) or not not_native(reply):
            return
        key = _key(step)
        if key is None:
            return
        if len(self.until) >= MAX_QUEUES:
            self.until.clear()
        self.until[key] = time.monotonic() + self.hold_s

    def forget(self) -> None:
        """Remember no hand-back."""
        self.until.clear()


@dataclass(slots=True)
class Memory:
    """One connector's memory (``conn.memory``)."""

    handbacks: HandBacks = field(default_factory=HandBacks)
    #: queue names this connector added to the registry (``verbs.registry.note``)
    registered: set[str] = field(default_factory=set)
