"""Durable steps: jobs that record their steps, sleep without a slot and wait for signals.

The verbs under ``current_job().step / sleep / wait_for`` and ``app.signal`` (DESIGN §3h).
Each takes a connector first, as every verb does (``steps.drive``: sync or asyncio).

Theory of operation. A durable handler re-runs from the top on every run of its job (a
retry, a resume after a crash, a sleep or a signal); each step it passes returns what was
recorded the first time instead of running again. So every step is recorded ON THE JOB'S
ROW, ``emq:{q}:job:<id>`` (``includes/journal.lua``): ``steps`` counts them (the order),
``step:<name>`` = ``<ordinal>:<state>:<at_ms>:<until_ms>``, ``out:<name>`` = the result
bytes. The row, not a key beside it, because every path that deletes a row (an ack that
keeps nothing, including the native ``EMQ.ACK``/``EMQ.ACKMANY``; retention's ``trim``;
``discard`` and ``purge``; a flow's rollback) then deletes the journal in the same
``DEL``, with no new work on the hot path and nothing to leak: a journal lives and dies,
is kept and trimmed, exactly as its job does. Names, not positions, key the journal (a
step added to the code shifts nothing); a name is unique within a job.

- ``record`` (script ``step``): token-fenced (a stale holder writes nothing:
  ``EMQSTALE step token mismatch``), written once (a second record of a name keeps the
  first and says so: ``Recorded.fresh`` False). ``steps`` (script ``journal``) reads the
  whole journal in order in one round trip, for a run's replay and ``app.job(id).steps``.
  A recorded step is progress: the reaper counts a durable job's stalls since its last
  recorded step (``stall_base`` on the row), not since it was admitted.
- ``sleep`` (script ``sleep``): token-fenced; records the step ``sleeping`` with its wake
  (SERVER now + ms, or an absolute ms) and sends the job to the schedule at the wake, as
  ``delay`` does: attempts untouched and ``delays + 1`` in the same script, so the retry
  budget (attempts less delays) spends nothing. The ordinary promote and claim wake it;
  the re-run's ``sleep`` finds the wake passed and records the step ``done`` (a listing
  says ``done`` as soon as the SERVER clock passes the wake). The row names the step
  (``sleeping``) so ``why`` says "sleeping in step X until ...".
- ``wait_for`` (script ``wait``): token-fenced; parks the job in state ``waiting`` (on
  ``emq:{q}:waiting`` scored by the SERVER ms it parked, on ``emq:{q}:signal:<key>``, its
  timeout on ``emq:{q}:deadlines``), off active, ``delays + 1``. A signal already stored
  is taken at once instead (the step is done, nothing parked). At the timeout the beat's
  deadline sweep (``jobs.expire``, which the beat already runs when ``deadlines`` has a
  passed entry) records the step ``timed_out`` and sends the job back to pending: the
  re-run raises ``errors.SignalTimeout``. The legs wake for it as for a run-at (the
  earliest deadline counts in ``jobs.next_due``, and a timeout ahead of the heads leaves a
  ``due`` token), so a timeout lands within ms, not a beat, late (a sleep's wake is a
  run-at, woken like any scheduled job).
  ``cancel`` ends a waiting (or sleeping) job ``cancelled``, its step ``cancelled``.
  ``expires`` never meets a waiting job: a job drops its deadline when it is first
  claimed, and only a claimed job can wait.
- ``signal`` (scripts ``signal`` and ``resume``): every job waiting on the key, on any
  queue, gets the payload as its step's result and goes back to pending at its priority
  (or its group's lane); the payload is kept ``ttl_ms`` for late waiters.

Across slots. A queue's keys share one slot; a signal key spans queues. The rendezvous
lives in the key's own slot, ``emq:{sig:<key>}``: ``:value`` (the stored payload, PX
ttl) and ``:queues`` (a zset of the queues that have waiters, scored by the SERVER ms one
registered). The waiter (after a fenced check that writes nothing, so a refusal leaves
no trace and a replay ends there): register its queue and read the value (one script,
key slot);
a value there is taken at once (the step is done, nothing parks); else park (queue
slot), unless the queue holds a copy of the signal. The sender: store the value and read
the index (one script, key slot), THEN resume each queue read (one script per queue
slot, which also leaves the queue a copy of the payload, ``emq:{q}:signalled:<key>``, PX
the TTL), THEN drop the index entries scored before its store. The two key-slot scripts
run one after the other: if the store came first, the registration reads the value; if
the registration came first, the sender reads the queue, and its resume and the park
run one after the other in the queue's slot: a resume after the park finds the job, a
park after the resume finds the copy and takes it. Either way no waiter is left behind
by a signal it raced, and nothing depends on the waiter surviving past its park. A
resume is idempotent (it resumes only rows still ``waiting`` on that key, and empties the
queue's waiter set), so a signal may be sent again. An index entry is dropped only when
it is older than a store whose resumes all landed; one written later stays (its waiter
read the value itself).

What is atomic: each script above, in its one slot. Not atomic: a wait as a whole (three
round trips) and a signal as a whole (the store, then the resumes). A waiter that dies
between its registration and its park leaves an index entry (a signal's resume finds no
job there: harmless), never a parked job no signal can find. A sender that fails part
way leaves the index in place, so sending the signal again resumes whoever is still
waiting. Two signals of one key racing each other may leave a queue the copy of either
(a waiter gets one of the payloads sent within the TTL). A wait whose
timeout sweep runs before a racing signal's resume times out (the first transition in
the queue's slot wins). The TTL bounds the guarantee: a waiter that registers after the
stored value expired waits for the next signal.

Clocks: every instant here is SERVER ms (``TIME`` inside the scripts): a sleep's wake
(``mode="in"``; ``"at"`` takes the caller's absolute ms), a wait's timeout, a signal's
TTL, every ``at_ms``. Nothing here reads the host clock.
"""

from __future__ import annotations

from echomq.verbs.durable.journal import (
    Recorded,
    Step,
    StepState,
    from_row,
    record,
    step_name,
    steps,
)
from echomq.verbs.durable.signals import DEFAULT_SIGNAL_TTL_MS, signal, stored, wait_for
from echomq.verbs.durable.sleeps import sleep

__all__ = [
    "DEFAULT_SIGNAL_TTL_MS",
    "Recorded",
    "Step",
    "StepState",
    "from_row",
    "record",
    "signal",
    "sleep",
    "step_name",
    "steps",
    "stored",
    "wait_for",
]
