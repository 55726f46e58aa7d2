"""Waiting for a job's end and reading what it left: ``App.result`` / ``App.aresult``.

Theory of operation. A task declared with ``keep_result=`` admits its jobs with
``notify_ms``: when such a job ends (completed, dead, cancelled or expired) the ending transition
pushes one token on ``emq:{q}:done:<id>``, and an ack stores the JSON return value on
``emq:{q}:result:<id>``, both kept that long. A waiter reads the job's state; while it is
not final it blocks on the done list (``jobs.wait_done``: ``BLPOP``, the token pushed back
for the next waiter), so it wakes the moment the job ends without polling. A job admitted
without ``notify_ms`` has no token: the waiter then re-reads its state once a second.

Outcomes: the kept value (``None`` when the task keeps none); ``errors.JobFailed`` when the
job died, ``errors.JobCancelled`` when it was cancelled, ``errors.JobExpired`` when its
deadline passed before it started, ``TimeoutError`` when ``timeout``
passes first, ``errors.JobNotFound`` when no queue looked at knows the id.

The waiting logic is written once, as a verb (``wait``) made of other verbs' steps
(``jobs.get``, ``jobs.result``, ``jobs.wait_done``), so either connector runs it. Clocks:
``timeout`` is on the HOST monotonic clock.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from echomq.core import errors
from echomq.core.payload import PLAIN, Format
from echomq.core.steps import Verb, verb
from echomq.verbs import jobs, registry

#: how long one blocking wait lasts for a job that pushes no done token
POLL_S = 1.0
#: the longest single blocking wait at the default 5 s socket timeout; the caller cuts it
#: to its connector's (``block_s``, ``Base.block_for``): a longer wait is several of these
#: (the state is read again between them)
BLOCK_S = 4.0
FINAL = ("completed", "dead", "cancelled", "expired")


class Found(NamedTuple):
    queue: str
    row: dict[str, Any] | None
    result: bytes | None


def timeout_s(timeout: float | dt.timedelta | None) -> float | None:
    """Seconds from a number or a ``timedelta``; ``None`` waits forever."""
    if timeout is None:
        return None
    if isinstance(timeout, dt.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be seconds or a timedelta, not {type(timeout).__name__}")
    if timeout < 0:
        raise ValueError("timeout must be >= 0")
    return float(timeout)


def locate(queues: Sequence[str], job_id: str) -> Verb[Found | None]:
    """The steps finding the first queue whose row or kept result knows ``job_id``."""
    for queue in queues:
        row = yield from jobs.get.steps(queue, job_id)
        result = yield from jobs.result.steps(queue, job_id)
        if row or result is not None:
            return Found(queue, row, result)
    return None


def value_of(result: bytes | None, fmt: Format = PLAIN) -> Any:
    """A kept result's value (read through ``fmt``'s codec and serializer)."""
    return None if result is None else fmt.loads(result)


@verb
def wait(queues: Sequence[str], job_id: str, timeout: float | None,
         fmt: Format = PLAIN, block_s: float = BLOCK_S) -> Verb[Any]:
    """Wait for ``job_id`` to end; its kept value, or the error of its end (see above).
    ``block_s``: the longest one blocking call may last on the caller's connector (short
    of its socket timeout, ``Base.block_for``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    known: str | None = None
    while True:
        found = yield from locate([known] if known else queues, job_id)
        if found is None:
            if known is not None:  # it ended and its row was deleted: nothing was kept
                return None
            raise errors.JobNotFound(f"no job {job_id} on {', '.join(queues)} (never "
                                     f"queued, or finished and no longer kept)")
        known = found.queue
        if found.result is not None:
            return value_of(found.result, fmt)
        row = found.row or {}
        state = row.get("state")
        # a deadline: end it if it has passed (the sweep the workers' beat runs), so a
        # waiter with no worker running still learns the job's fate
        if row.get("expires") and state in ("pending", "scheduled"):
            try:
                ended = yield from jobs.expire.steps(known, 100)
            except errors.ServerError:  # a read-only ACL user ends nothing: it waits
                ended = 0
            if ended:
                continue
        if state == "completed":
            return None
        if state == "dead":
            raise errors.JobFailed(job_id, row.get("error"))
        if state == "cancelled":
            raise errors.JobCancelled(job_id)
        if state == "expired":
            deadline = row.get("expires")
            raise errors.JobExpired(job_id, int(deadline) if deadline else None)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"job {job_id} still {state} after {timeout:g} s")
        slice_s = min(POLL_S if not row.get("notify") else BLOCK_S, block_s)
        if left is not None:
            slice_s = min(slice_s, left)
        yield from jobs.wait_done.steps(known, job_id, max(slice_s, 0.01))


@verb
def wait_found(job_id: str, mine: Sequence[str], narrowed: bool, timeout: float | None,
               fmt: Format = PLAIN, block_s: float = BLOCK_S) -> Verb[Any]:
    """``wait`` where the job is: on ``mine`` when ``narrowed`` (a caller named the queue),
    else on the queue ``registry.find`` locates among ``mine`` (an app's queues) and every
    registered queue, or on ``mine`` when it finds none."""
    where = list(mine)

    def calls() -> Verb[Any]:
        found = None if narrowed else (yield from registry.find.steps(job_id, where))
        got = yield from wait.steps(where if found is None else [found], job_id, timeout,
                                    fmt, block_s)
        return got

    return calls()
