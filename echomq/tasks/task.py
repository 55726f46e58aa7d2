"""``Task``: a function registered with an ``App``, and how its runs are admitted.

``task.enqueue(...)`` queues a run now, ``enqueue_in``/``enqueue_at`` later, the ``a*``
forms await the same on the app's ``AsyncConnector``; ``enqueue_many`` admits many runs in
one round trip per 500. Every form first binds the arguments to the function's signature
and raises ``TypeError`` before anything is written when they do not fit
(``echomq.tasks.arguments``; ``@app.task(check_args=False)`` turns it off).
``task.options(priority=, group=, unique=, unique_for=, queue=, job_id=)`` returns the same
task bound to admission options:

- ``priority``: 0..1_000_000, lower runs first; equal priorities run in mint order.
- ``group``: the job waits in its group's lane (groups take turns; see ``echomq.verbs.groups``).
  A str, or a function of the task's arguments (``@app.task(group=lambda tenant, *a, **k:
  tenant)``) called at each enqueue; it returns the group name, or ``None`` for none.
- ``unique``: a key; while a job admitted with it is waiting or running (and for
  ``unique_for`` after its admission, when given) an enqueue writes nothing and returns
  that job's id. The key is released when the owner completes, dies or is cancelled.
- ``queue``: this call goes to another queue (a worker of the app serving it runs it).
- ``job_id``: the job's id, a ``JOB``-prefixed idempotency key (Celery's ``task_id``): while
  a row with that id lives (waiting, running, dead, or completed and kept), another enqueue
  with it writes nothing and returns the same id.
- ``expires``: a deadline (ms or ``timedelta`` after admission on the SERVER clock, or a
  ``datetime``): a job not started by then ends ``expired`` and never runs.
- ``debounce``: a key; calls while its job waits fold into that job (the last payload
  wins), which runs ``debounce_ms`` after the last call, never later than
  ``debounce_max_ms`` after the first (``echomq.verbs.jobs.debouncing``).

Clocks: ``enqueue_in`` is priced on the SERVER clock; ``enqueue_at`` takes the caller's
instant (a ``datetime`` with its own zone, naive = local time); ``unique_for`` counts from
admission on the SERVER clock.
"""

from __future__ import annotations

import datetime as dt
import inspect
import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from echomq.core import backoff, ids, keyspace
from echomq.core import guards as guard
from echomq.core import partitions as parts
from echomq.core.options import (
    Deadline,
    Debounce,
    Group,
    check_debounce,
    check_expires,
    check_group,
    check_unique,
)
from echomq.core.payload import encode, encode_call
from echomq.core.times import seconds_to_ms, to_epoch_ms, to_ms
from echomq.runtime import tracing
from echomq.runtime.callbacks import After, Callback
from echomq.runtime.handler import Job
from echomq.runtime.isolation import isolated, reference
from echomq.runtime.route import Route
from echomq.runtime.verdict import Classes
from echomq.tasks.arguments import Binder
from echomq.verbs import jobs

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.canvas import Signature

P = ParamSpec("P")
R = TypeVar("R")

MAX_JOB_ID_BYTES = 1_000

def check_isolation(fn: Callable[..., Any], isolation: str) -> tuple[str, str] | None:
    """Where a child process finds ``fn`` for ``isolation="process"`` (``None`` for the
    default ``"thread"``); ``ValueError`` for anything else, or an ``async def``."""
    if isolation == "thread":
        return None
    if isolation != "process":
        raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
    if inspect.iscoroutinefunction(fn):
        raise ValueError("isolation='process' is for plain functions; an async handler is "
                         "already cancelled at its timeout or cancel request")
    return reference(fn)


class Task(Generic[P, R]):
    """A function registered with an ``App``; calling it runs it here, ``enqueue`` queues it."""

    def __init__(
        self,
        app: App,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        max_attempts: int,
        backoff: backoff.Policy | None,
        retry_delay_ms: int,
        lease_ms: int,
        timeout_ms: int | None = None,
        keep_result_ms: int | None = None,
        isolation: str = "thread",
        group: Group | None = None,
        partitions: int = 1,
        retry_on: Classes | None = None,
        dont_retry_on: Classes = (),
        check_args: bool = True,
        rate: tuple[int, int] | None = None,
        on_success: Callback | None = None,
        on_failure: Callback | None = None,
        on_retry: Callback | None = None,
        expires: Deadline | None = None,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        #: the queues this task's jobs live on: ``[queue]``, or ``queue#0`` ... for a
        #: partitioned queue (see ``echomq.core.partitions``)
        self.partitions = parts.validate(queue, partitions)
        self.queues = parts.names(queue, partitions)
        # round robin over partitions, shared by options(); each process starts at a random
        # partition, so many short-lived producers do not all pile onto partition 0
        self._round = itertools.count(random.randrange(partitions))
        self._partition_key: str | bytes | int | None = None
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.retry_delay_ms = retry_delay_ms
        self.lease_ms = lease_ms
        self.timeout_ms = timeout_ms
        self.keep_result_ms = keep_result_ms
        self.isolation = isolation
        self._ref = check_isolation(fn, isolation)
        # admission options (``options``): a plain job by default
        self.priority = 0
        self.group: Group | None = None if group is None else check_group(group)
        self.unique: str | None = None
        self.unique_for_ms: int | None = None
        self.job_id: str | None = None
        # which errors retry (echomq.runtime.verdict), the queue's declared rate, callbacks
        self.retry_on = retry_on
        self.dont_retry_on = dont_retry_on
        self.rate = rate
        self.on_success, self.on_failure, self.on_retry = on_success, on_failure, on_retry
        self._callbacks = any(c is not None for c in (on_success, on_failure, on_retry))
        self.check_args = check_args
        self._binder = Binder(name, fn) if check_args else None
        self.expires: Deadline | None = expires
        self.debounce: Debounce | None = None
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        group = self.group if isinstance(self.group, str | None) else "<function>"
        opts = "".join(f" {k}={v!r}" for k, v in self._options(group).items())
        return f"<Task {self.name} queue={self.queue}{opts}>"

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """This task's call with these arguments, made later: a flow node
        (``app.flow(report.s(month), children=[fetch.s(p) for p in pages])``, ``chain``,
        ``group(...).then(...)``; see ``echomq.tasks.canvas``). It runs with this task's options
        (queue, priority, group, unique key), or its own: ``.options(priority=, group=,
        unique=, unique_for=, delay=, at=, max_attempts=, backoff=, retry_delay_ms=)``."""
        from echomq.tasks.canvas import Signature

        return Signature(self, args, kwargs)

    def payload(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload ``enqueue`` would write for these arguments."""
        return encode(self.name, args, kwargs)

    def _sent(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload of one enqueue: with OpenTelemetry installed, built inside an
        ``echomq enqueue`` span whose context it carries (``echomq.runtime.tracing``)."""
        if tracing.quiet():
            return encode_call(self.name, args, kwargs)
        with tracing.enqueue_span(self.name, self.queue) as carrier:
            return encode(self.name, args, kwargs, trace=carrier)

    def check(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """``TypeError`` when ``args``/``kwargs`` do not fit the function's signature (off
        with ``check_args=False``); called by every enqueue before anything is written."""
        if self._binder is not None:
            self._binder.check(args, kwargs)

    def options(
        self,
        *,
        priority: int | None = None,
        group: Group | None = None,
        unique: str | None = None,
        unique_for: float | dt.timedelta | None = None,
        partition_key: str | bytes | int | None = None,
        queue: str | None = None,
        job_id: str | None = None,
        expires: int | dt.timedelta | dt.datetime | None = None,
        debounce: str | None = None,
        debounce_ms: int | dt.timedelta | None = None,
        debounce_max_ms: int | dt.timedelta | None = None,
    ) -> Task[P, R]:
        """This task bound to admission options (unset ones keep their current value):
        ``priority`` 0..1_000_000 (lower first), ``group`` (a lane: a name, or a function
        of the task's arguments that returns one), ``unique`` (a key:
        while its owner waits or runs, enqueue returns the owner's id and writes nothing),
        ``unique_for`` (seconds or ``timedelta``: keep the key that long after admission
        even once the owner ended). ``partition_key`` picks the partition of a partitioned
        queue by the key's hash (same key, same partition); without one, jobs go round
        robin. ``queue``: send this call to another queue. ``job_id``: the job's id, a
        ``JOB``-prefixed idempotency key (a second enqueue with it is a duplicate and
        returns the same id).
        ``expires``: the run's deadline, ms or ``timedelta`` after admission (SERVER
        clock) or a ``datetime``; not started by then, it ends ``expired`` and never runs.
        ``debounce`` (a key) with ``debounce_ms`` and optionally ``debounce_max_ms`` (ms or
        ``timedelta``): ``enqueue`` folds calls with the key into the one job that waits for
        it (last payload wins), run ``debounce_ms`` after the last call and never later than
        ``debounce_max_ms`` after the first; every call returns that job's id. Checked here,
        before any I/O."""
        if partition_key is not None:
            parts.key_index(partition_key, self.partitions)  # type-checks before any I/O
        window = None
        if debounce is not None:
            window = check_debounce(debounce, debounce_ms, debounce_max_ms)
        elif debounce_ms is not None or debounce_max_ms is not None:
            raise ValueError("debounce_ms and debounce_max_ms need a debounce key "
                             "(options(debounce=..., debounce_ms=...))")
        deadline = None if expires is None else check_expires(expires)
        # a shallow copy without copy.copy's reduce protocol: a per-call options(unique=...)
        # is on the producer's hot path
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        if queue is not None and queue != self.queue:
            keyspace.validate_queue(queue)
            # another task's partitioned queue keeps its partitions; any other is one queue
            split = next((t.partitions for t in self.app.tasks.values() if t.queue == queue),
                         1)
            bound.queue, bound.partitions = queue, split
            bound.queues = parts.names(queue, split)
            bound._round = itertools.count(random.randrange(split))
        if job_id is not None:
            bound.job_id = check_job_id(job_id)
        if window is not None:
            bound.debounce = window
        if deadline is not None:
            bound.expires = deadline
        if partition_key is not None:
            bound._partition_key = partition_key
        if priority is not None:
            bound.priority = guard.priority(priority)
        if group is not None:
            bound.group = check_group(group)
        if unique is not None:
            bound.unique = check_unique(unique)
        if unique_for is not None:
            bound.unique_for_ms = seconds_to_ms("unique_for", unique_for)
        if bound.unique_for_ms is not None and bound.unique is None:
            raise ValueError("unique_for needs a unique key (options(unique=..., ...))")
        if bound.debounce is not None and bound.unique is not None:
            raise ValueError("debounce and unique do not combine: a debounce key already "
                             "holds one job per key")
        return bound

    def target_queue(self) -> str:
        """The queue the next enqueue writes to: the task's queue, or for a partitioned one
        the key's partition (``options(partition_key=...)``) or the next one round robin."""
        if self.partitions == 1:
            return self.queue
        # a given job id picks its partition, so its duplicate lands where it did
        key = self._partition_key if self._partition_key is not None else self.job_id
        if key is None and self.debounce is not None:
            key = self.debounce.key  # every call of one debounce key meets on one partition
        index = (next(self._round) % self.partitions if key is None
                 else parts.key_index(key, self.partitions))
        return self.queues[index]

    def _options(self, group: str | None = None) -> dict[str, Any]:
        """The admission options that differ from a plain job (``group``: this run's)."""
        out: dict[str, Any] = {}
        if self.priority:
            out["priority"] = self.priority
        if group is not None:
            out["group"] = group
        if self.expires is not None:
            out.update(self.expires.kwargs())
        return out

    def group_for(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
        """The group a run with these arguments joins: the task's group name, or what its
        group function returns for them (``None``: no group). A function's error, or a name
        that cannot be a group, raises naming the task, before anything is written."""
        group = self.group
        if group is None or isinstance(group, str):
            return group
        try:
            name = group(*args, **kwargs)
        except (TypeError, ValueError) as exc:  # e.g. arguments the function does not take
            raise type(exc)(f"{self.name}: group function failed for these arguments: "
                            f"{exc}") from exc
        if name is None:
            return None
        try:
            return keyspace.validate_group(name)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.name}: group function returned {name!r}: {exc}") from None

    def _admission(self, mode: str, value: int, body: bytes, group: str | None
                   ) -> tuple[Any, tuple[Any, ...], dict[str, Any], str]:
        """``(verb, args, kwargs, job_id)`` for one admission (``args[0]`` its queue): the
        general ``jobs.admit`` when a unique key or a kept result needs it, else the
        classic verb."""
        job_id, q = self.job_id or ids.mint(), self.target_queue()
        opts = self._options(group)
        if self.debounce is not None:
            if mode != "now":
                raise TypeError(f"{self.name} is debounced: its run-at is its debounce "
                                f"window, so enqueue it (not enqueue_in/enqueue_at)")
            window = self.debounce
            return jobs.debounce, (q, job_id, body, window.key, window.ms, window.max_ms), \
                dict(notify_ms=self.keep_result_ms, **opts), job_id
        if (self.unique is not None or self.keep_result_ms is not None
                or self.expires is not None):
            return jobs.admit, (q, job_id, body), dict(
                mode=mode, value=value, unique=self.unique, unique_for_ms=self.unique_for_ms,
                notify_ms=self.keep_result_ms, **opts), job_id
        if mode == "now":
            return jobs.enqueue, (q, job_id, body), opts, job_id
        verb = jobs.enqueue_in if mode == "in" else jobs.enqueue_at
        return verb, (q, job_id, body, value), opts, job_id

    @staticmethod
    def _id_of(reply: Any, job_id: str) -> str:
        # jobs.admit answers Admitted(outcome, id): the owner's id when a unique key refused
        return str(reply.id) if hasattr(reply, "id") else job_id

    def _run(self, args: Sequence[Any], kwargs: dict[str, Any], traced: bool = True
             ) -> tuple[bytes, str | None]:
        """A run's payload (``_sent``: traced when tracing is on) and group, both checked
        (with the arguments) before any I/O."""
        group = self.group_for(args, kwargs)  # its own errors first, naming the group
        if self._binder is not None:
            self._binder.check(args, kwargs)
        body = self._sent(*args, **kwargs) if traced else self.payload(*args, **kwargs)
        return body, group

    def _enqueue(self, mode: str, value: int, run: tuple[bytes, str | None]) -> str:
        verb, args, kwargs, job_id = self._admission(mode, value, *run)
        conn = self.app.connector()
        return self._id_of(self.app.admit(conn, verb, *args, **kwargs), job_id)

    async def _aenqueue(self, mode: str, value: int, run: tuple[bytes, str | None]) -> str:
        verb, args, kwargs, job_id = self._admission(mode, value, *run)
        conn = await self.app.aconnector()
        return self._id_of(await self.app.admit(conn, verb, *args, **kwargs), job_id)

    # sync enqueue ------------------------------------------------------------------------

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run now; the job id (the owner's id when a live unique key refused it)."""
        if self._plain():
            # the per-job call most producers make: the same verb, id and bytes as
            # _enqueue, without assembling the general admission on the way
            if self._binder is not None:
                self._binder.check(args, kwargs)
            body, job_id = self._sent(*args, **kwargs), self.job_id or ids.mint()
            conn = self.app.connector()
            jobs.enqueue(conn, self.queue, job_id, body)
            self.app.registered(conn, self.queue)  # only once admitted: a refusal writes nothing
            return job_id
        flat = self._flat()
        if flat is not None:
            # a priority, a unique key or a kept result, nothing else: one jobs.admit with
            # the options prepared once (at wire 6 one EMQ.ENQUEUE), as _enqueue would send
            if self._binder is not None:
                self._binder.check(args, kwargs)
            body, job_id = self._sent(*args, **kwargs), self.job_id or ids.mint()
            conn = self.app.connector()
            got = jobs.admit_now(conn, self.queue, job_id, body, flat)
            self.app.registered(conn, self.queue)
            return got.id
        return self._enqueue("now", 0, self._run(args, kwargs))

    def _plain(self) -> bool:
        """No admission option, one partition, no durability wait: a bare ``jobs.enqueue``."""
        return (self.group is None and not self.priority and self.unique is None
                and self.keep_result_ms is None and self.partitions == 1
                and self.app.wait is None and self.expires is None and self.debounce is None)

    def _flat(self) -> jobs.Options | None:
        """The admission options of a flat job (priority, unique key, kept result: no
        group, deadline or debounce, one partition, no durability wait), or ``None``; made
        once per bound task."""
        if (self.group is not None or self.partitions != 1 or self.app.wait is not None
                or self.expires is not None or self.debounce is not None):
            return None
        made = self.__dict__.get("_flat_opts")
        key = (self.priority, self.unique, self.unique_for_ms, self.keep_result_ms)
        if made is None or made[0] != key:
            made = (key, jobs.Options.of(self.priority, None, self.unique, self.unique_for_ms,
                                         self.keep_result_ms))
            self.__dict__["_flat_opts"] = made
        return made[1]

    def enqueue_in(self, delay: int | dt.timedelta, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run ``delay`` (ms or ``timedelta``) from SERVER now; the job id."""
        ms = guard.span("delay", to_ms(delay))
        return self._enqueue("in", ms, self._run(args, kwargs))

    def enqueue_at(self, when: int | dt.datetime, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run at ``when`` (epoch ms or ``datetime``, the caller's clock); the id."""
        at = to_epoch_ms(when)
        return self._enqueue("at", at, self._run(args, kwargs))

    def enqueue_many(self, calls: Iterable[Sequence[Any]]) -> list[str]:
        """Queue many runs now, one tuple of positional arguments per run
        (``send.enqueue_many([("a@b.c",), ("d@e.f",)])``): the job ids in order.

        One bulk call per 500 jobs, all pipelined in one round trip; the task's options
        apply to every run. With a ``unique`` key each run is admitted on its own (the
        first owns the key; the others return its id). Every argument is checked before
        anything is written.
        """
        runs = self._runs(calls)
        if self._one_by_one():
            return [self._enqueue("now", 0, run) for run in runs]
        per_queue, job_ids = self._bulk_items(runs)
        for q, items in per_queue.items():
            self.app.admit(self.app.connector(), jobs.enqueue_many, q, items)
        return job_ids

    # async enqueue -----------------------------------------------------------------------

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """``enqueue``, awaited on the app's ``AsyncConnector``."""
        if self._plain():  # as in enqueue: a bare jobs.enqueue
            if self._binder is not None:
                self._binder.check(args, kwargs)
            body, job_id = self._sent(*args, **kwargs), self.job_id or ids.mint()
            # the loop's connector with this queue noted needs no await
            conn = self.app.aconnector_ready(self.queue)
            if conn is not None:
                await jobs.enqueue(conn, self.queue, job_id, body)
                return job_id
            conn = await self.app.aconnector()
            await jobs.enqueue(conn, self.queue, job_id, body)
            await self.app.aregistered(conn, self.queue)  # only once admitted
            return job_id
        flat = self._flat()
        if flat is not None:  # as in enqueue: one jobs.admit, its options prepared once
            if self._binder is not None:
                self._binder.check(args, kwargs)
            body, job_id = self._sent(*args, **kwargs), self.job_id or ids.mint()
            conn = await self.app.aconnector()
            got = await jobs.admit_now(conn, self.queue, job_id, body, flat)
            await self.app.aregistered(conn, self.queue)
            return got.id
        return await self._aenqueue("now", 0, self._run(args, kwargs))

    async def aenqueue_in(self, delay: int | dt.timedelta, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        ms = guard.span("delay", to_ms(delay))
        return await self._aenqueue("in", ms, self._run(args, kwargs))

    async def aenqueue_at(self, when: int | dt.datetime, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        at = to_epoch_ms(when)
        return await self._aenqueue("at", at, self._run(args, kwargs))

    async def aenqueue_many(self, calls: Iterable[Sequence[Any]]) -> list[str]:
        """``enqueue_many``, awaited."""
        runs = self._runs(calls)
        if self._one_by_one():
            return [await self._aenqueue("now", 0, run) for run in runs]
        per_queue, job_ids = self._bulk_items(runs)
        for q, items in per_queue.items():
            await self.app.admit(await self.app.aconnector(), jobs.enqueue_many, q, items)
        return job_ids

    def _one_by_one(self) -> bool:
        """Whether a bulk enqueue admits each run on its own: a unique or debounce key (the
        first call owns it) or a deadline (the bulk tail has no room for one)."""
        return self.unique is not None or self.debounce is not None or self.expires is not None

    def _runs(self, calls: Iterable[Sequence[Any]]) -> list[tuple[bytes, str | None]]:
        if self.job_id is not None:
            raise ValueError(f"{self.name}: options(job_id=...) names one job; "
                             "enqueue_many admits many (give each its own enqueue)")
        runs: list[tuple[bytes, str | None]] = []
        for i, call in enumerate(calls):
            if isinstance(call, (str, bytes)) or not isinstance(call, Sequence):
                raise TypeError(f"{self.name}.enqueue_many: call {i} must be a tuple of "
                                f"positional arguments, not {type(call).__name__}")
            runs.append(self._run(call, {}, traced=False))
        return runs

    def _bulk_items(self, runs: list[tuple[bytes, str | None]]
                    ) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
        """The bulk items per target queue (one queue unless partitioned) and the ids; the
        options per run (a group function may give each run its own group)."""
        job_ids = [ids.mint() for _ in runs]
        per_queue: dict[str, list[tuple[Any, ...]]] = {}
        for jid, (body, group) in zip(job_ids, runs, strict=True):
            opts = self._options(group)
            if self.keep_result_ms is not None:
                opts["notify_ms"] = self.keep_result_ms
            per_queue.setdefault(self.target_queue(), []).append(
                (jid, body, opts) if opts else (jid, body))
        return per_queue, job_ids

    # running -----------------------------------------------------------------------------

    def route(self, args: list[Any], kwargs: dict[str, Any],
              trace: dict[str, str] | None = None) -> Route:
        """How a consumer runs one job of this task with these decoded arguments (inside
        an ``echomq run`` span, a child of ``trace``, when OpenTelemetry is installed)."""
        fn: Callable[..., Any] = self.fn
        if self._ref is not None:
            handler = isolated(self._ref, args, kwargs)
        elif inspect.iscoroutinefunction(fn):
            handler = _awaiting(fn, args, kwargs)
        else:
            handler = _calling(fn, args, kwargs)
        after = None
        if self._callbacks:
            after = After(self.name, args, kwargs, self.on_success, self.on_failure,
                          self.on_retry)
            if self.on_success is not None:
                handler = _boxed(handler, after.box)
        handler = tracing.traced(handler, self.name, trace)
        return Route(handler, self.max_attempts, self.backoff, self.retry_delay_ms,
                     self.lease_ms, self.timeout_ms, self.keep_result_ms, name=self.name,
                     retry_on=self.retry_on, dont_retry_on=self.dont_retry_on, after=after)


def _awaiting(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
              ) -> Callable[[Job], Any]:
    async def handler(_job: Job) -> Any:
        return await fn(*args, **kwargs)

    return handler


def _calling(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
             ) -> Callable[[Job], Any]:
    def handler(_job: Job) -> Any:
        return fn(*args, **kwargs)

    return handler


def _boxed(handler: Callable[[Job], Any], box: list[Any]) -> Callable[[Job], Any]:
    """``handler`` that also puts its return value in ``box`` (for ``on_success``)."""
    if inspect.iscoroutinefunction(handler):
        async def boxed_async(job: Job) -> Any:
            box[:] = [value := await handler(job)]
            return value

        return boxed_async

    def boxed(job: Job) -> Any:
        box[:] = [value := handler(job)]
        return value

    return boxed


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
