"""The job's states and the transitions between them: the one table everything reads.

Theory of operation. A job is one hash row, ``emq:{q}:job:<id>``, whose ``state`` field
names which one sorted set holds its id:

- ``scheduled``: on ``schedule``, scored by its run-at ms. Fenced out of pending.
- ``pending``: on ``pending`` at score 0 (byte order = mint order = claim order), or on its
  group's lane ``g:<group>:pending``.
- ``active``: on ``active``, scored by its lease expiry (SERVER ms); the row's ``attempts``
  is the token that fences every later verb on the job in hand.
- ``completed``: acked; kept on ``completed`` (scored by SERVER ms) or deleted outright.
- ``dead``: dead-lettered on ``dead``, scored by the SERVER ms it died.
- ``cancelled``: ended by a cancel on ``cancelled``, scored by the SERVER ms it was
  cancelled (kept and trimmed like ``dead``). A cancel of an active job only marks its row
  (``cancel`` = 1); the job stays ``active`` until its holder, a retry or a reap ends it.
- ``waiting-children``: a flow parent (``echomq.verbs.flows``) on ``waiting-children``, scored by
  the SERVER ms it was admitted; never claimable. The carry of its last child's end
  releases it to pending at its priority; a child dead under the ``fail`` policy
  dead-letters it (and, revived and completed, brings it back). A flow node whose unique
  key a live job owns is no job of its own: a stub row (``state = linked``, on no set)
  that settles with that job (``echomq.verbs.flows``).
- ``waiting``: a durable job parked on a signal (``echomq.verbs.durable``: ``wait_for``) on
  ``waiting``, scored by the SERVER ms it parked; never claimable. Its row names the signal
  key (``wait_key``), its step and its timeout (``wait_until``, SERVER ms, also on
  ``deadlines``). A signal for the key (``resume``) or the timeout (the deadline sweep,
  ``expire``) sends it back to pending at its priority with the step done or timed out; a
  cancel ends it ``cancelled``. A durable *sleep* is no state of its own: the job is
  ``scheduled`` at its wake, its row naming the sleep's step (``sleeping``).
- ``expired``: a job admitted with a deadline (``expires``, SERVER ms on the row) that no
  claim started by then, on ``expired`` scored by the SERVER ms it expired (kept and
  trimmed like ``dead``). Whatever held it (pending, a lane, the schedule), it never runs:
  the claim that pops it, the promote that releases it, or the beat's deadline sweep
  (``expire``: waiting jobs past their deadline on ``emq:{q}:deadlines``) ends it. A job
  that started keeps no deadline (a retry or a reaped lease runs it again).

Every move between them is one atomic server-side transition (a script, or a native module
command at wire 6). ``TRANSITIONS`` lists each verb with the states it moves a job from and
to, and the clock that prices it: ``server`` (Valkey ``TIME`` inside the transition),
``caller`` (an absolute ms the caller computed), or ``host`` (the registry's clock, for
recurrence, which mints new jobs and moves no existing one). ``script`` names the Lua file's
verb that runs the row and ``native`` the module command that runs it at wire 6 (``-``: the
script runs on both wires).
"""

from __future__ import annotations

from dataclasses import dataclass

STATES = ("scheduled", "pending", "active", "completed", "dead", "cancelled", "expired",
          "waiting-children", "waiting")

#: the sorted set each state lives on (the lane is the grouped form of ``pending``)
SET_OF = {
    "scheduled": "schedule",
    "pending": "pending",
    "active": "active",
    "completed": "completed",
    "dead": "dead",
    "cancelled": "cancelled",
    "expired": "expired",
    "waiting-children": "waiting-children",
    "waiting": "waiting",
}


@dataclass(frozen=True, slots=True)
class Transition:
    verb: str
    source: tuple[str, ...]  # () = the job has no row yet (an admission)
    target: str
    clock: str
    note: str
    script: str = ""  # the script's verb ("" = the verb's own name)
    native: str = "-"  # the module command at wire 6, or "-"

    @property
    def runs(self) -> str:
        return self.script or self.verb


TRANSITIONS: tuple[Transition, ...] = (
    Transition("enqueue", (), "pending", "-", "admit claimable now at its priority (or on its group's lane); a duplicate id writes nothing", "enqueue", "EMQ.ENQUEUE"),
    Transition("enqueue_at", (), "scheduled", "caller", "absolute run-at ms", "schedule", "EMQ.SCHEDULE"),
    Transition("enqueue_in", (), "scheduled", "server", "run-at = TIME + delay", "schedule", "EMQ.SCHEDULE"),
    Transition("promote", ("scheduled",), "pending", "server", "due = score <= TIME; at the row's priority; grouped rows to their lane", "promote", "EMQ.PROMOTE"),
    Transition("promote", ("scheduled",), "expired", "server", "the script: a due row past its deadline ends expired (EMQ.PROMOTE moves it to pending; its claim expires it)"),
    Transition("expire", ("pending", "scheduled"), "expired", "server", "the beat's deadline sweep: waiting rows whose deadline is at or before TIME (paused queue, full group, far run-at)"),
    Transition("debounce", (), "scheduled", "server", "first call of a key: run-at = TIME + debounce_ms"),
    Transition("debounce", ("scheduled", "pending"), "scheduled", "server", "a later call while it waits: payload replaced, run-at = min(TIME + debounce_ms, first call + debounce_max_ms)"),
    Transition("claim", ("pending",), "active", "server", "lease = TIME + lease_ms; attempts + 1 = token; pending and the ring of ready groups in turn; nothing while paused"),
    Transition("claim", ("pending",), "cancelled", "server", "a row marked cancel is ended, not handed out"),
    Transition("claim", ("pending",), "dead", "server", "a row it cannot run (no row, no payload, not a hash, an unknown state) ends dead: error 'corrupt row: <why>', counted corrupt; the next job is claimed in its place"),
    Transition("claim", ("pending",), "expired", "server", "a row whose deadline (expires) is at or before TIME ends expired, not handed out; a claimed row drops its deadline"),
    Transition("extend", ("active",), "active", "server", "lease checkpoint, token-fenced (checkpoint: also reports a cancel request)"),
    Transition("ack", ("active",), "completed", "server", "token-fenced; row kept or deleted; wins over a pending cancel request"),
    Transition("retry", ("active",), "scheduled", "server", "token-fenced; run-at = TIME + delay"),
    Transition("retry", ("active",), "dead", "server", "when attempts reach max_attempts"),
    Transition("retry", ("active",), "cancelled", "server", "when a cancel was requested: never retried"),
    Transition("delay", ("active",), "scheduled", "server", "token-fenced; attempts untouched ('at' mode: caller)", "delay", "EMQ.DELAY"),
    Transition("reap", ("active",), "pending", "server", "lease expired (score <= TIME); stalled + 1; at its priority"),
    Transition("reap", ("active",), "dead", "server", "stalled past the threshold"),
    Transition("reap", ("active",), "cancelled", "server", "lease expired and a cancel was requested"),
    Transition("rate_limited", ("active",), "pending", "server", "token-fenced; attempts - 1 (no attempt spent); its group (or the queue) claims nothing for ms"),
    Transition("cancel", ("pending", "scheduled", "waiting-children", "waiting"), "cancelled", "server", "removed from its set with the row in one call (a flow parent: flows.cancel also cancels its waiting subtree; a durable sleep or wait: its step reads cancelled)"),
    Transition("cancel", ("active",), "active", "-", "marks the row (cancel = 1): 'requested'"),
    Transition("finish_cancelled", ("active",), "cancelled", "server", "token-fenced: the holder stopped the handler"),
    Transition("reschedule", ("scheduled",), "scheduled", "server", "native only: rescore, ZADD XX", "-", "EMQ.RESCHEDULE"),
    Transition("revive", ("dead",), "pending", "-", "operator action: back to pending with attempts = 0, at its priority"),
    Transition("revive", ("dead",), "waiting-children", "server", "a flow parent failed by a child: it waits for its children again"),
    Transition("trim", ("completed", "dead", "cancelled", "expired"), "(deleted)", "server", "retention: oldest first, by count and/or age, bounded batches"),
    Transition("flow_admit", (), "waiting-children", "server", "a flow parent, before its children exist (leaves are admitted like enqueue / enqueue_in)"),
    Transition("flow_carry", ("waiting-children",), "pending", "server", "the carry of its last child's end (exactly once per child) releases it at its priority"),
    Transition("flow_carry", ("waiting-children",), "scheduled", "server", "as above, for a parent admitted with a delay or run-at still ahead (not_before): on the schedule until then"),
    Transition("flow_carry", ("waiting-children",), "dead", "server", "a child died or was cancelled under the 'fail' policy"),
    Transition("flow_carry", ("dead",), "pending", "server", "a parent failed by its children: the failed child was revived and completed"),
    Transition("record", ("active",), "active", "server", "durable step: token-fenced; the step's result written once on the row (a second record of the name keeps the first); at_ms = TIME", "step"),
    Transition("sleep", ("active",), "scheduled", "server", "durable sleep: token-fenced; wake = TIME + ms ('at': caller); delays + 1 (no attempt spent); the row names the step (sleeping)"),
    Transition("sleep", ("active",), "active", "server", "the re-run's sleep once its wake has come (TIME >= wake): the step is recorded done, the job stays in hand"),
    Transition("sleep", ("active",), "cancelled", "server", "a cancel was requested while it ran: it ends cancelled instead of sleeping"),
    Transition("wait_for", ("active",), "waiting", "server", "durable wait: token-fenced; parked on waiting (and on deadlines at TIME + timeout); delays + 1", "wait"),
    Transition("wait_for", ("active",), "active", "server", "a signal stored before the wait (or a step already recorded): the step is done with its payload, nothing parked", "wait"),
    Transition("wait_for", ("active",), "cancelled", "server", "a cancel was requested while it ran: it ends cancelled instead of parking", "wait"),
    Transition("signal", ("waiting",), "pending", "server", "each job waiting on the key, queue by queue: the payload recorded as its step, back at its priority (or its lane)", "resume"),
    Transition("time_out", ("waiting",), "pending", "server", "the deadline sweep: a wait whose timeout is at or before TIME; its step recorded timed_out", "expire"),
    Transition("fire", (), "pending", "host", "a due registration mints one occurrence (score-checked); next run from host now"),
    Transition("discard", ("pending", "scheduled", "completed", "dead", "cancelled", "expired", "waiting"), "(deleted)", "-", "operator action (dashboard delete): row, set entry, result, owned unique key together; refused while active"),
)


def moves(verb: str) -> list[Transition]:
    """The rows of ``TRANSITIONS`` for ``verb``."""
    return [t for t in TRANSITIONS if t.verb == verb]


def table_markdown() -> str:
    """``TRANSITIONS`` as a Markdown table (docs/reference/states.md's copy is generated from this)."""
    lines = ["| verb | from | to | clock | script | wire 6 | note |",
             "|---|---|---|---|---|---|---|"]
    for t in TRANSITIONS:
        src = ", ".join(t.source) or "(new)"
        script = f"`{t.runs}`" if t.runs != "-" else "-"
        lines.append(f"| `{t.verb}` | {src} | {t.target} | {t.clock} | {script} | {t.native} "
                     f"| {t.note} |")
    return "\n".join(lines)
