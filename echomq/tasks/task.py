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

Units: ``enqueue_in``'s delay, ``expires``, ``debounce_ms``/``debounce_max_ms`` are
milliseconds as a bare int; ``unique_for`` is seconds as a bare number; a ``timedelta`` is
accepted for each.

Every form makes a ``Plan`` (``echomq.tasks.admission``) and hands it to the app
(``echomq.tasks.producer.Producer``): ``enqueue`` and ``aenqueue`` drive the same steps,
on the sync or the async connector.

Clocks: ``enqueue_in`` is priced on the SERVER clock; ``enqueue_at`` takes the caller's
instant (a ``datetime`` with its own zone, naive = local time); ``unique_for`` counts from
admission on the SERVER clock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, ParamSpec, TypeVar

from echomq.core import guards as guard
from echomq.core import ids, keyspace, serial
from echomq.core import partitions as parts
from echomq.core.options import Group, check_debounce, check_expires, check_group, check_unique
from echomq.core.payload import encode, encode_call
from echomq.core.times import seconds_to_ms, to_epoch_ms, to_ms
from echomq.runtime import tracing
from echomq.runtime.route import Route
from echomq.tasks import oncommit, routing
from echomq.tasks.admission import Admission, Plan, check_job_id
from echomq.tasks.arguments import Binder, argument_picker
from echomq.tasks.batches import current_batch
from echomq.tasks.canvas import Signature
from echomq.tasks.chunks import Chunker
from echomq.tasks.defaults import TaskDefaults, check_isolation
from echomq.tasks.producer import Producer

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["Task", "check_job_id"]


class Task(Generic[P, R]):
    """A function registered with an ``App``; calling it runs it here, ``enqueue`` queues it.

    ``defaults``: what ``@app.task`` declared (``TaskDefaults``); ``admission``: this bound
    task's admission options (``Admission``; ``options`` makes a new bound task). Their
    fields read as the task's own (``task.queue``, ``task.max_attempts``, ``task.priority``).
    """

    def __init__(self, app: Producer, fn: Callable[P, R], defaults: TaskDefaults,
                 name: str) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.defaults = defaults
        #: where a child process finds ``fn`` (``isolation="process"``), else ``None``
        self.ref = check_isolation(fn, defaults.isolation)
        group = defaults.group
        by = defaults.tenants.group_by if defaults.tenants else None
        if by is not None:  # @app.task(group_by=...): each run's group from its arguments
            group = by if callable(by) else argument_picker(fn, by)
        self.admission = Admission(
            defaults.queue, parts.validate(defaults.queue, defaults.partitions),
            group=group, expires=defaults.expires,
            keep_result_ms=defaults.keep_result_ms)
        self.binder = Binder(name, fn) if defaults.check_args else None
        #: this bound task's handler timeout (``options(timeout=)``), carried in each
        #: payload; ``None``: the task's (``@app.task(timeout=)``)
        self.call_timeout_ms: int | None = None
        # its worker decodes the classes its annotations name without encoding one (an
        # unresolvable annotation only skips this)
        with contextlib.suppress(Exception):
            serial.annotated(typing.get_type_hints(fn))
        #: a chunk task's gatherer (``echomq.tasks.chunks``), else ``None``
        self.chunker = (None if defaults.chunk is None
                        else Chunker(fn, defaults.chunk, defaults.chunk_wait_ms))
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__wrapped__ = fn

    def __getattr__(self, attr: str) -> Any:
        # only reached for a name not on the instance: a field of the admission (queue,
        # queues, priority, ...) or of the declaration (max_attempts, lease_ms, rate, ...)
        if attr in ("admission", "defaults"):
            raise AttributeError(attr)
        for source in (self.admission, self.defaults):
            if hasattr(source, attr):
                return getattr(source, attr)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        group = self.admission.group
        shown = group if isinstance(group, str | None) else "<function>"
        opts = "".join(f" {k}={v!r}" for k, v in self.admission.options(shown).items())
        return f"<Task {self.name} queue={self.admission.queue}{opts}>"

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """This task's call with these arguments, made later: a flow node
        (``app.flow(report.s(month), children=[fetch.s(p) for p in pages])``, ``chain``,
        ``group(...).then(...)``; see ``echomq.tasks.canvas``). It runs with this task's options
        (queue, priority, group, unique key), or its own: ``.options(priority=, group=,
        unique=, unique_for=, delay=, at=, max_attempts=, backoff=, retry_delay_ms=)``."""
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        """``s``, immutable: in a chain, or as a group's callback, the call runs after the
        step before it without being handed its result (Celery's ``si``)."""
        return Signature(self, args, kwargs, immutable=True)

    def payload(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload ``enqueue`` would write for these arguments."""
        return encode(self.name, args, kwargs, timeout_ms=self.call_timeout_ms,
                      fmt=self.app.format)

    def _sent(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload of one enqueue: with OpenTelemetry installed, built inside an
        ``echomq enqueue`` span whose context it carries (``echomq.runtime.tracing``)."""
        if tracing.quiet():
            if self.call_timeout_ms is not None:
                return self.payload(*args, **kwargs)
            return encode_call(self.name, args, kwargs, self.app.format)
        with tracing.enqueue_span(self.name, self.admission.queue) as carrier:
            return encode(self.name, args, kwargs, trace=carrier,
                          timeout_ms=self.call_timeout_ms, fmt=self.app.format)

    def check(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """``TypeError`` when ``args``/``kwargs`` do not fit the function's signature (off
        with ``check_args=False``); called by every enqueue before anything is written."""
        if self.binder is not None:
            self.binder.check(args, kwargs)

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
        timeout: float | dt.timedelta | None = None,
    ) -> Task[P, R]:
        """This task bound to admission options (unset ones keep their current value),
        checked here, before any I/O:

        - ``priority`` 0..1_000_000 (lower first); ``group`` (a lane: a name, or a
          function of the task's arguments that returns one).
        - ``unique`` (a key: while its owner waits or runs, enqueue returns the owner's id
          and writes nothing); ``unique_for`` (SECONDS as a bare number, or a
          ``timedelta``): keep the key that long after admission even once the owner ended.
        - ``partition_key``: the partition of a partitioned queue, by the key's hash (same
          key, same partition); without one, jobs go round robin. ``queue``: send this
          call to another queue. ``job_id``: the job's id, a ``JOB``-prefixed idempotency
          key (a second enqueue with it is a duplicate and returns the same id).
        - ``expires``: the run's deadline, MILLISECONDS (bare int) or a ``timedelta``
          after admission (SERVER clock), or a ``datetime``; not started by then, it ends
          ``expired`` and never runs.
        - ``debounce`` (a key) with ``debounce_ms`` and optionally ``debounce_max_ms``
          (MILLISECONDS or ``timedelta``): ``enqueue`` folds calls with the key into the
          one job that waits for it (last payload wins), run ``debounce_ms`` after the
          last call and never later than ``debounce_max_ms`` after the first; every call
          returns that job's id.
        - ``timeout``: this call's handler timeout (SECONDS as a bare number, or a
          ``timedelta``, as ``@app.task(timeout=)``), over the task's: it travels in the
          payload and the worker applies it.
        """
        changes: dict[str, Any] = {}
        if partition_key is not None:
            parts.key_index(partition_key, self.admission.partitions)  # its type, no I/O
            changes["partition_key"] = partition_key
        if debounce is not None:
            changes["debounce"] = check_debounce(debounce, debounce_ms, debounce_max_ms)
        elif debounce_ms is not None or debounce_max_ms is not None:
            raise ValueError("debounce_ms and debounce_max_ms need a debounce key "
                             "(options(debounce=..., debounce_ms=...))")
        if expires is not None:
            changes["expires"] = check_expires(expires)
        if queue is not None:
            changes["queue"] = keyspace.validate_queue(queue)
        if job_id is not None:
            changes["job_id"] = check_job_id(job_id)
        if priority is not None:
            changes["priority"] = guard.priority(priority)
        if group is not None:
            changes["group"] = check_group(group)
        if unique is not None:
            changes["unique"] = check_unique(unique)
        if unique_for is not None:
            changes["unique_for_ms"] = seconds_to_ms("unique_for", unique_for)
        # a shallow copy without copy.copy's reduce protocol: a per-call options(unique=...)
        # is on the producer's hot path
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound.admission = self.admission.bound(self.app.partitions_of, **changes)
        if timeout is not None:
            bound.call_timeout_ms = seconds_to_ms("timeout", timeout)
        return bound

    def target_queue(self) -> str:
        """The queue the next enqueue writes to: the task's queue, or for a partitioned one
        the key's partition (``options(partition_key=...)``) or the next one round robin."""
        return self.admission.target_queue()

    def group_for(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
        """The group a run with these arguments joins: the task's group name, or what its
        group function returns for them (``None``: no group). A function's error, or a name
        that cannot be a group, raises naming the task, before anything is written."""
        group = self.admission.group
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

    # -- plans: what every enqueue form hands the app ------------------------------------

    def _run(self, args: Sequence[Any], kwargs: dict[str, Any], traced: bool = True
             ) -> tuple[bytes, str | None]:
        """A run's payload (``_sent``: traced when tracing is on) and group, both checked
        (with the arguments) before any I/O."""
        group = self.group_for(args, kwargs)  # its own errors first, naming the group
        if self.binder is not None:
            self.binder.check(args, kwargs)
        body = self._sent(*args, **kwargs) if traced else self.payload(*args, **kwargs)
        return body, group  # a bare pair: enqueue_many makes one per run

    def _now(self, args: Sequence[Any], kwargs: dict[str, Any]) -> Plan[str]:
        adm = self.admission
        if adm.flat is not None:
            # the per-job call most producers make (no option, or ones prepared once):
            # the same verb, id and bytes as the general plan, without assembling it
            if self.binder is not None:
                self.binder.check(args, kwargs)
            return adm.now(self._sent(*args, **kwargs))
        return adm.plan(self.name, "now", 0, *self._run(args, kwargs))

    def _in(self, delay: int | dt.timedelta, args: Sequence[Any], kwargs: dict[str, Any]
            ) -> Plan[str]:
        ms = guard.span("delay", to_ms(delay))
        return self.admission.plan(self.name, "in", ms, *self._run(args, kwargs))

    def _at(self, when: int | dt.datetime, args: Sequence[Any], kwargs: dict[str, Any]
            ) -> Plan[str]:
        at = to_epoch_ms(when)
        return self.admission.plan(self.name, "at", at, *self._run(args, kwargs))

    def _many(self, calls: Iterable[Sequence[Any]]) -> Plan[list[str]]:
        if self.admission.job_id is not None:
            raise ValueError(f"{self.name}: options(job_id=...) names one job; "
                             "enqueue_many admits many (give each its own enqueue)")
        runs = [self._run(call, {}, traced=False) for call in self._calls(calls)]
        return self.admission.many(self.name, runs)

    def _calls(self, calls: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
        """``enqueue_many``'s calls, each checked to be a tuple of positional arguments."""
        out = list(calls)
        for i, call in enumerate(out):
            if isinstance(call, (str, bytes)) or not isinstance(call, Sequence):
                raise TypeError(f"{self.name}.enqueue_many: call {i} must be a tuple of "
                                f"positional arguments, not {type(call).__name__}")
        return out

    def _signatures(self, calls: Iterable[Sequence[Any]]) -> list[Any]:
        """``enqueue_many``'s calls as signatures (to join a batch)."""
        return [self.s(*call) for call in self._calls(calls)]

    # -- enqueue, on either connector ----------------------------------------------------

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run now; the job id (the owner's id when a live unique key refused it).
        Inside a ``with app.batch(...)`` block the run joins that batch."""
        batch = current_batch()
        if batch is not None:
            return batch.add(self.s(*args, **kwargs))[0]
        return self.app.submit(self._now(args, kwargs))

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """``enqueue``, awaited on the app's ``AsyncConnector`` (inside an ``async with
        app.batch(...)`` block the run joins that batch)."""
        batch = current_batch()
        if batch is not None:
            return (await batch.aadd(self.s(*args, **kwargs)))[0]
        return await self.app.asubmit(self._now(args, kwargs))

    def enqueue_in(self, delay: int | dt.timedelta, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run ``delay`` (MILLISECONDS as a bare int, or a ``timedelta``) from
        SERVER now; the job id."""
        return self.app.submit(self._in(delay, args, kwargs))

    async def aenqueue_in(self, delay: int | dt.timedelta, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        """``enqueue_in``, awaited."""
        return await self.app.asubmit(self._in(delay, args, kwargs))

    def enqueue_at(self, when: int | dt.datetime, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run at ``when`` (epoch ms or ``datetime``, the caller's clock); the id."""
        return self.app.submit(self._at(when, args, kwargs))

    async def aenqueue_at(self, when: int | dt.datetime, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        """``enqueue_at``, awaited."""
        return await self.app.asubmit(self._at(when, args, kwargs))

    def enqueue_many(self, calls: Iterable[Sequence[Any]]) -> list[str]:
        """Queue many runs now, one tuple of positional arguments per run
        (``send.enqueue_many([("a@b.c",), ("d@e.f",)])``): the job ids in order.

        One bulk call per 500 jobs, all pipelined in one round trip; the task's options
        apply to every run. With a ``unique`` key each run is admitted on its own (the
        first owns the key; the others return its id). Every argument is checked before
        anything is written. Inside an ``app.batch(...)`` block the runs join that batch.
        """
        batch = current_batch()
        if batch is not None:
            return batch.add(*self._signatures(calls))
        return self.app.submit(self._many(calls))

    async def aenqueue_many(self, calls: Iterable[Sequence[Any]]) -> list[str]:
        """``enqueue_many``, awaited."""
        batch = current_batch()
        if batch is not None:
            return await batch.aadd(*self._signatures(calls))
        return await self.app.asubmit(self._many(calls))

    def enqueue_on_commit(self, *args: Any, **kwargs: Any) -> str:
        """``enqueue`` when the surrounding database transaction commits, never when it
        rolls back (Django's ``on_commit``; an SQLAlchemy session given as ``session=``
        or bound by ``echomq.on_commit.session(s)``; at once outside a transaction). The
        id is minted and the arguments checked and encoded now: the id, returned now."""
        sqla = oncommit.take_session(kwargs)
        bound = self if self.admission.job_id is not None else self.options(job_id=ids.mint())
        plan = bound._now(args, kwargs)
        oncommit.defer(lambda: self.app.submit(plan), sqla)
        return bound.admission.job_id or ""

    # -- running -------------------------------------------------------------------------

    def route(self, args: list[Any], kwargs: dict[str, Any],
              trace: dict[str, str] | None = None) -> Route:
        """How a consumer runs one job of this task with these decoded arguments
        (``echomq.tasks.routing.route``)."""
        return routing.route(self, args, kwargs, trace)
