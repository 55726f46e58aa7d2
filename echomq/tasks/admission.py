"""How a task's runs are admitted: the ``Admission`` value and the ``Plan`` it makes.

``Admission`` holds a bound task's admission options (queue and partitions, priority,
group, unique key, deadline, debounce window, partition key, job id, kept-result ms), made
and checked once per bound task (``task.options(...)`` makes a new one). ``plan(...)``
turns one run into a ``Plan``: the steps of one admission verb (``core.steps``) with the
queues it registers, which the producer drives on either connector (``Producer.submit``
/ ``asubmit``). Three shapes, cheapest first:

- a plain job (no option, one partition): a bare ``jobs.enqueue``;
- a flat job (priority, unique key, kept result): ``jobs.admit_now`` with the
  ``jobs.Options`` made here once;
- anything else: ``jobs.admit``, ``jobs.debounce`` or ``jobs.enqueue_in``/``enqueue_at``.

Units: ``unique_for_ms``, ``keep_result_ms``, a deadline's and a debounce window's ms are
milliseconds (``task.options`` takes ``unique_for`` in seconds). Clocks: a delay and a
deadline after admission are priced on the SERVER clock; an instant is the caller's.
No I/O here: a plan's steps run when the producer drives them.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NamedTuple, TypeVar

from echomq.core import guards as guard
from echomq.core import ids, keyspace
from echomq.core import partitions as parts
from echomq.core.options import Deadline, Debounce, Group
from echomq.core.steps import Verb
from echomq.verbs import jobs

T = TypeVar("T")

MAX_JOB_ID_BYTES = 1_000


class Plan(NamedTuple, Generic[T]):
    """One admission, not yet sent: its ``steps`` (checked when the plan was made), the
    ``queues`` it registers once admitted, and ``answer``, what the caller gets from the
    steps' result (a job id). ``durable``: whether the producer's durability wait
    (``App(wait_replicas=...)``) applies; its ``NotDurable`` carries the steps' result."""

    queues: tuple[str, ...]
    steps: Verb[Any]
    answer: Callable[[Any], T]
    durable: bool = True
    #: the same steps made anew (the same ids) for a retry after an ambiguous failure
    #: (``echomq.tasks.retrying``); ``None``: the plan is sent once
    again: Callable[[], Verb[Any]] | None = None

    @classmethod
    def made(cls, queues: tuple[str, ...], make: Callable[[], Verb[Any]],
             answer: Callable[[Any], T], durable: bool = True) -> Plan[T]:
        """A plan whose steps ``make`` makes, again on each retry (its ids fixed in it)."""
        return cls(queues, make(), answer, durable, make)


@dataclass(frozen=True, slots=True, eq=False)
class Admission:
    """A bound task's admission options, checked (``check_*`` and ``guard``) before this
    is made; see the module doc. ``flat``: the prepared ``jobs.Options`` of a flat job
    (``None`` when the job needs the general path); ``plain``: no option at all."""

    queue: str
    partitions: int = 1
    priority: int = 0
    group: Group | None = None
    unique: str | None = None
    unique_for_ms: int | None = None
    job_id: str | None = None
    partition_key: str | bytes | int | None = None
    expires: Deadline | None = None
    debounce: Debounce | None = None
    keep_result_ms: int | None = None
    #: the round robin over partitions, shared by the bound copies on the same queue; each
    #: process starts at a random partition, so short-lived producers spread
    turn: Iterator[int] | None = None
    queues: list[str] = field(init=False)
    flat: jobs.Options | None = field(init=False)
    plain: bool = field(init=False)

    def __post_init__(self) -> None:
        if self.unique_for_ms is not None and self.unique is None:
            raise ValueError("unique_for needs a unique key (options(unique=..., ...))")
        if self.debounce is not None and self.unique is not None:
            raise ValueError("debounce and unique do not combine: a debounce key already "
                             "holds one job per key")
        put = object.__setattr__  # frozen: the derived fields are set once, here
        put(self, "queues", parts.names(self.queue, self.partitions))
        if self.turn is None:
            put(self, "turn", itertools.count(random.randrange(self.partitions)))
        flat = None
        if (self.group is None and self.partitions == 1 and self.expires is None
                and self.debounce is None):
            flat = jobs.Options.of(self.priority, None, self.unique, self.unique_for_ms,
                                   self.keep_result_ms)
        put(self, "flat", flat)
        put(self, "plain", flat is jobs.PLAIN)

    def bound(self, partitions_of: Any = None, **changes: Any) -> Admission:
        """This admission with ``changes`` (checked by the caller); a new ``queue`` takes
        ``partitions_of(queue)`` partitions and its own round robin."""
        queue = changes.get("queue")
        if queue is not None and queue != self.queue:
            keyspace.validate_queue(queue)
            changes["partitions"] = partitions_of(queue) if partitions_of else 1
            changes["turn"] = None
        else:
            changes.pop("queue", None)
        return replace(self, **changes)

    def target_queue(self) -> str:
        """The queue the next run goes to: the queue, or for a partitioned one the key's
        partition (the partition key, else the job id, else the debounce key: a
        duplicate or a folded call lands where the first did), else the next round robin."""
        if self.partitions == 1:
            return self.queue
        key = self.partition_key if self.partition_key is not None else self.job_id
        if key is None and self.debounce is not None:
            key = self.debounce.key
        assert self.turn is not None
        index = (next(self.turn) % self.partitions if key is None
                 else parts.key_index(key, self.partitions))
        return self.queues[index]

    def options(self, group: str | None = None) -> dict[str, Any]:
        """The admission keywords that differ from a plain job (``group``: this run's)."""
        out: dict[str, Any] = {}
        if self.priority:
            out["priority"] = self.priority
        if group is not None:
            out["group"] = group
        if self.expires is not None:
            out.update(self.expires.kwargs())
        return out

    # -- plans ---------------------------------------------------------------------------

    def now(self, body: bytes) -> Plan[str]:
        """A plain or flat run admitted now (``plain``/``flat`` said so): its plan."""
        job_id, q = self.job_id or ids.mint(), self.queue
        if self.plain:
            return Plan.made((q,), lambda: jobs.enqueue.steps(q, job_id, body),
                             lambda _: job_id)
        flat = self.flat
        assert flat is not None
        return Plan.made((q,), lambda: jobs.admit_now.steps(q, job_id, body, flat),
                         _owner(job_id))

    def plan(self, name: str, mode: str, value: int, body: bytes, group: str | None
             ) -> Plan[str]:
        """One run (its payload ``body``, the ``group`` it joins) admitted ``mode``
        (``"now"``, ``"in"`` ``value`` ms on the SERVER clock, ``"at"`` ``value`` epoch
        ms): the general path (its verb's guards run here)."""
        job_id, q = self.job_id or ids.mint(), self.target_queue()
        opts = self.options(group)
        if self.debounce is not None and mode != "now":
            raise TypeError(f"{name} is debounced: its run-at is its debounce window, "
                            f"so enqueue it (not enqueue_in/enqueue_at)")

        def steps() -> Verb[Any]:
            if self.debounce is not None:
                window = self.debounce
                return jobs.debounce.steps(q, job_id, body, window.key, window.ms,
                                           window.max_ms, notify_ms=self.keep_result_ms,
                                           **opts)
            if (self.unique is not None or self.keep_result_ms is not None
                    or self.expires is not None):
                return jobs.admit.steps(q, job_id, body, mode=mode, value=value,
                                        unique=self.unique, unique_for_ms=self.unique_for_ms,
                                        notify_ms=self.keep_result_ms, **opts)
            if mode == "now":
                return jobs.enqueue.steps(q, job_id, body, **opts)
            if mode == "in":
                return jobs.enqueue_in.steps(q, job_id, body, value, **opts)
            return jobs.enqueue_at.steps(q, job_id, body, value, **opts)

        return Plan.made((q,), steps, _owner(job_id))

    def many(self, name: str, runs: Sequence[tuple[bytes, str | None]]) -> Plan[list[str]]:
        """Runs admitted now, together: one bulk call per 500 jobs per target queue, or
        one admission each when a unique or debounce key or a deadline needs it (the first
        owns the key; the bulk tail has no room for a deadline). The ids, in order."""
        if self.unique is not None or self.debounce is not None or self.expires is not None:
            plans = [self.plan(name, "now", 0, body, group) for body, group in runs]
            return Plan.made(tuple(dict.fromkeys(q for p in plans for q in p.queues)),
                             lambda: _each([_anew(p) for p in plans]),
                             lambda got: [p.answer(g)
                                          for p, g in zip(plans, got, strict=True)])
        job_ids = [ids.mint() for _ in runs]
        per_queue: dict[str, list[tuple[Any, ...]]] = {}
        for jid, (body, group) in zip(job_ids, runs, strict=True):
            opts = self.options(group)
            if self.keep_result_ms is not None:
                opts["notify_ms"] = self.keep_result_ms
            per_queue.setdefault(self.target_queue(), []).append(
                (jid, body, opts) if opts else (jid, body))
        return Plan.made(tuple(per_queue),
                         lambda: _each([jobs.enqueue_many.steps(q, items)
                                        for q, items in per_queue.items()]),
                         lambda _: job_ids)


def _anew(plan: Plan[Any]) -> Verb[Any]:
    """``plan``'s steps, made anew when it can make them (an inner plan of ``many``)."""
    return plan.again() if plan.again is not None else plan.steps


def _owner(job_id: str) -> Callable[[Any], str]:
    """The answer of an admission: the id that holds the slot, ``Admitted.id`` (the
    owner's when a live unique key refused the run), else ``job_id``."""
    def answer(got: Any) -> str:
        return str(got.id) if isinstance(got, jobs.Admitted) else job_id

    return answer


def _each(steps: Sequence[Verb[T]]) -> Verb[list[T]]:
    """Every one of ``steps`` in turn (one round trip each): their results, in order."""
    out = []
    for one in steps:
        out.append((yield from one))
    return out


def check_job_id(job_id: object) -> str:
    """A job id given by the caller (``options(job_id=)``): a ``str`` starting ``JOB`` (the
    wire's namespace), at most 1,000 UTF-8 bytes, else ``TypeError``/``ValueError``."""
    guard.string("job_id", job_id)
    assert isinstance(job_id, str)
    if not job_id.startswith("JOB"):
        raise ValueError(f"job_id {job_id!r} must start with JOB (the job id namespace), "
                         f"e.g. 'JOB-invoice-42'")
    if len(job_id.encode()) > MAX_JOB_ID_BYTES:
        raise ValueError(f"job_id is at most {MAX_JOB_ID_BYTES} UTF-8 bytes")
    return job_id
