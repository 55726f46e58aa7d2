"""The step journal of a durable job: what a step records and how a run reads it back.

A step is recorded on the job's own row (``includes/journal.lua``): ``step:<name>`` holds
its ordinal, state and SERVER-clock instants, ``out:<name>`` its result bytes. ``record``
writes one step's result (fenced by the job's token, written once); ``steps`` reads them
all in order in one round trip, for a run's replay and for ``app.job(id).steps``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.steps import Eval, Verb, single, text, verb

#: the longest step name, in UTF-8 bytes (a field name on the row)
MAX_NAME_BYTES = 200


class StepState(StrEnum):
    """Where a step stands (``StepState.DONE == "done"``)."""

    DONE = "done"  # recorded: its result (a value, a signal's payload) is final
    SLEEPING = "sleeping"  # a sleep whose wake (until_ms) has not come
    WAITING = "waiting"  # a wait parked on its signal key
    TIMED_OUT = "timed_out"  # a wait whose timeout came first (errors.SignalTimeout)
    CANCELLED = "cancelled"  # the job was cancelled while it slept or waited


class Step(NamedTuple):
    """One recorded step: ``at_ms`` is the SERVER ms it reached its state (a sleep's done
    is its wake), ``until_ms`` a sleep's wake or a wait's timeout (SERVER ms, ``None``:
    none), ``result`` its bytes (``None``: none)."""

    name: str
    state: StepState
    at_ms: int | None
    until_ms: int | None = None
    result: bytes | None = None

    def as_dict(self) -> dict[str, Any]:
        """The public listing entry: ``{"name", "state", "at_ms"}`` (``app.job(id).steps``)."""
        return {"name": self.name, "state": str(self.state), "at_ms": self.at_ms}


class Recorded(NamedTuple):
    """What a fenced step verb answered: ``fresh`` when this call recorded the step (False:
    it was recorded before and is returned as it stands), and the ``step``."""

    fresh: bool
    step: Step


def step_name(name: object) -> str:
    """A checked step name (before any I/O): a non-empty ``str`` of at most 200 bytes."""
    checked = guard.string("name", name)
    if not checked:
        raise ValueError("step name must not be empty")
    if len(checked.encode()) > MAX_NAME_BYTES:
        raise ValueError(f"step name is longer than {MAX_NAME_BYTES} bytes")
    return checked


def _ms(value: Any) -> int | None:
    got = text(value) if value is not None else ""
    return int(got) if got.lstrip("-").isdigit() else None


def recorded(name: str, reply: Any) -> Recorded:
    """A fenced step script's reply ``{fresh, state, at_ms, until_ms, result}``."""
    fresh, state, at, until, result = reply
    return Recorded(bool(int(fresh)), Step(name, StepState(text(state)), _ms(at), _ms(until),
                                           result))


def held_keys(queue: str, job_id: str, token: int) -> tuple[str, str, str]:
    """The checked id and token of a job in hand, as a fenced script takes them: its row,
    ``active`` and the token as text."""
    guard.string("job_id", job_id)
    guard.non_negative("token", token)
    return keyspace.job_key(queue, job_id), keyspace.queue_key(queue, "active"), str(token)


@verb
def record(queue: str, job_id: str, token: int, name: str, result: bytes | str
           ) -> Verb[Recorded]:
    """Record step ``name``'s ``result`` on the job in hand, once (the ``step`` script).

    ``fresh``: this call wrote it, at SERVER now. Not fresh: a step of that name was
    recorded before, and the answer is that first record (its result, or a sleep's or a
    wait's own state): nothing is written, the first result wins. Refusals write nothing:
    ``StaleError`` (another token holds the job: a stale holder records nothing),
    ``GoneError``, ``StateError`` (``step not active``: the lease is gone), ``KindError``.
    """
    row, active, tok = held_keys(queue, job_id, token)
    step_name(name)
    guard.payload(result, "result")
    step = Eval("step", (row, active), (job_id, tok, name, result))
    return single(step, lambda r: recorded(name, r))


def _entry(name: str, meta: str, result: Any, now: int) -> Step:
    _ord, state, at, until = [*meta.split(":"), "", "", ""][:4]
    step = Step(name, StepState(state), _ms(at), _ms(until), result)
    if step.state is StepState.SLEEPING and step.until_ms is not None \
            and step.until_ms <= now:
        # a sleep is done once the SERVER clock passes its wake; the re-run's sleep
        # call writes it so, and the listing says so already
        step = step._replace(state=StepState.DONE, at_ms=step.until_ms)
    return step


def _listed(reply: Any) -> list[Step]:
    now = int(reply[0])
    return [_entry(text(reply[i]), text(reply[i + 1]), reply[i + 2], now)
            for i in range(1, len(reply), 3)]


def from_row(row: dict[str, Any], now_ms: int) -> list[Step]:
    """The steps recorded on a job row already read (``HGETALL``, fields as text), in
    order, as ``steps`` lists them at SERVER ``now_ms``: for a reader that runs no script
    (the dashboard's read-only user)."""
    found = []
    for field, meta in row.items():
        if field.startswith("step:"):
            ordinal = text(meta).split(":", 1)[0]
            found.append((int(ordinal) if ordinal.isdigit() else 0, field[5:], text(meta)))
    return [_entry(name, meta, row.get(f"out:{name}"), now_ms)
            for _ord, name, meta in sorted(found)]


@verb
def steps(queue: str, job_id: str) -> Verb[list[Step]]:
    """Every recorded step of the job, in the order they were recorded (the ``journal``
    script: one round trip, reads only); ``[]`` for no steps or no row. A sleep whose wake
    has passed on the SERVER clock reads ``done`` at its wake."""
    guard.string("job_id", job_id)
    step = Eval("journal", (keyspace.job_key(queue, job_id),), ())
    return single(step, _listed)
