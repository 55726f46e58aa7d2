"""A durable sleep: the job in hand leaves its slot for the schedule and resumes after.

``sleep`` is a ``Delay`` that remembers itself: the first call records the step
``sleeping`` with its wake (SERVER now + ms, or an absolute ms) and sends the job to the
schedule at the wake without spending an attempt; the promote and claim that follow are
the usual ones (no work added to them). The re-run calls ``sleep`` again: once the wake
has come the step is recorded ``done`` and the job stays in hand (the handler goes on); a
job handed out before its wake (an operator's run-now) goes back for the time left.
"""

from __future__ import annotations

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, verb
from echomq.verbs.durable.journal import Recorded, held_keys, recorded, step_name


@verb
def sleep(queue: str, job_id: str, token: int, name: str, ms: int, mode: str = "in"
          ) -> Verb[Recorded]:
    """Sleep step ``name`` of the job in hand (the ``sleep`` script), fenced by ``token``.

    ``mode="in"``: wake at SERVER now + ``ms``; ``mode="at"``: ``ms`` is the absolute wake
    (epoch ms). The answer's step is ``sleeping`` (the job is now on the schedule at
    ``until_ms``, ``state = scheduled``: the holder lets go, its token is spent) or
    ``done`` (the wake has come: the job stays in hand and runs on) or ``cancelled`` (a
    cancel was requested while it ran: it ended cancelled instead); a step of that name
    recorded otherwise is returned as it stands (``fresh`` False). Counts a delay, never an
    attempt. Refusals write nothing: ``StaleError``, ``GoneError``, ``StateError`` (``sleep
    not active``), ``KindError``.
    """
    row, active, tok = held_keys(queue, job_id, token)
    step_name(name)
    if guard.mode(mode) == "at":
        guard.instant("ms", ms)
    else:
        guard.span("ms", ms)  # a sleep of a negative span is a mistake, not "due now"
    step = Eval("sleep", (row, active, keyspace.queue_key(queue, "schedule")),
                (job_id, tok, name, mode, str(ms)))
    return single(step, lambda r: recorded(name, r))
