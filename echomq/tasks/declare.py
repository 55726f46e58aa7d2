"""Declaring tasks: ``@app.task`` and the recurrences ``@app.every``/``@app.cron`` stack on
it. ``App`` takes these from ``Declarations``; a recurrence is only recorded here (a worker
upserts it at start, its Pump fires it on the HOST clock)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, overload

from echomq.core import backoff, keyspace, rates
from echomq.core import guards as guard
from echomq.core import partitions as parts
from echomq.core.options import Group, check_expires, check_group
from echomq.core.payload import decode, encode
from echomq.core.times import seconds_to_ms, to_ms
from echomq.runtime import callbacks as callbacks_mod
from echomq.runtime.callbacks import Callback
from echomq.runtime.route import DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY_MS
from echomq.runtime.verdict import exception_classes
from echomq.tasks.task import Task

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A recurring registration a worker upserts at start (the Pump fires it)."""

    task: str
    queue: str
    name: str
    template: bytes
    every_ms: int | None = None
    cron: str | None = None
    tz: str | None = None
    #: the rest of the definition, as ``repeat.upsert`` takes it (jitter_ms, exclude,
    #: overlap, catchup, start_at, end_at, limit: only those given)
    options: tuple[tuple[str, Any], ...] = ()

    def upsert_kwargs(self) -> dict[str, Any]:
        """The keywords ``repeat.upsert`` takes for this definition."""
        how: dict[str, Any] = ({"every_ms": self.every_ms} if self.every_ms is not None
                               else {"cron": self.cron, "tz": self.tz})
        return {**how, **dict(self.options)}


class Declarations:
    """The task and recurrence registry of an ``App`` (its ``tasks`` and ``recurrences``)."""

    tasks: dict[str, Task[Any, Any]]
    recurrences: list[Recurrence]
    default_queue: str

    @overload
    def task(
        self,
        fn: Callable[P, R],
        *,
        queue: str | None = None,
        name: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: backoff.Policy | None = None,
        retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        timeout: float | dt.timedelta | None = None,
        keep_result: float | dt.timedelta | None = None,
        isolation: str = "thread",
        group: Group | None = None,
        partitions: int = 1,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] = (),
        check_args: bool = True,
        rate: str | tuple[int, Any] | None = None,
        on_success: Callback | None = None,
        on_failure: Callback | None = None,
        on_retry: Callback | None = None,
        expires: int | dt.timedelta | dt.datetime | None = None,
    ) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        *,
        queue: str | None = None,
        name: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: backoff.Policy | None = None,
        retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        timeout: float | dt.timedelta | None = None,
        keep_result: float | dt.timedelta | None = None,
        isolation: str = "thread",
        group: Group | None = None,
        partitions: int = 1,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] = (),
        check_args: bool = True,
        rate: str | tuple[int, Any] | None = None,
        on_success: Callback | None = None,
        on_failure: Callback | None = None,
        on_retry: Callback | None = None,
        expires: int | dt.timedelta | dt.datetime | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        queue: str | None = None,
        name: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: backoff.Policy | None = None,
        retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        timeout: float | dt.timedelta | None = None,
        keep_result: float | dt.timedelta | None = None,
        isolation: str = "thread",
        group: Group | None = None,
        partitions: int = 1,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = None,
        dont_retry_on: type[BaseException] | tuple[type[BaseException], ...] = (),
        check_args: bool = True,
        rate: str | tuple[int, Any] | None = None,
        on_success: Callback | None = None,
        on_failure: Callback | None = None,
        on_retry: Callback | None = None,
        expires: int | dt.timedelta | dt.datetime | None = None,
    ) -> Any:
        """Register a task (``@app.task`` or ``@app.task(queue=..., ...)``).

        ``max_attempts`` (default 25) runs before dead-lettering; a failure is retried after
        ``retry_delay_ms`` (default 1000) or, with ``backoff``, after
        ``backoff.delay_ms(policy, attempts)``; ``lease_ms`` (default 30 s) is the lease a
        running job holds, checkpointed every third of it.

        ``timeout`` (seconds or ``timedelta``; default: the worker's, off unless set): an
        async handler is cancelled at the deadline, a plain function is abandoned in its
        thread and its slot freed; the attempt fails with a ``TimeoutError`` text and
        retries like any failure. ``keep_result`` (seconds or ``timedelta``): keep the JSON
        return value that long (``app.job(id).result``, ``app.result(id)``).
        ``isolation="process"`` runs a plain function in a killable child process per job
        (``echomq.runtime.isolation``): a timeout or a cancel request stops it for real.
        ``partitions=8`` spreads the
        queue over ``queue#0`` ... ``queue#7``, each its own hash tag (a cluster spreads
        them over its primaries; see ``echomq.core.partitions`` and ``Task.options``).
        ``group``: the lane every run joins (groups take turns at the claim, each with its
        own limit and rate: ``echomq.verbs.groups``), as a name or as a function of the task's
        arguments called at each enqueue (``group=lambda tenant, *a, **k: tenant``; it may
        return ``None`` for no group); ``task.options(group=...)`` overrides it.

        Errors (``echomq.runtime.verdict``): every exception retries by default;
        ``retry_on=(OSError, ...)`` retries only those (subclasses included) and
        ``dont_retry_on=(ValueError, ...)`` never retries those (it wins over ``retry_on``):
        a job whose error is not retried is dead at once. ``backoff`` may be a list of
        delays (``[1_000, 5_000, 30_000]``, ms or ``timedelta``; the last repeats).
        ``check_args=False`` skips binding the arguments of each enqueue to the function's
        signature (``echomq.tasks.arguments``). ``rate="10/s"`` (``MAX/DURATION``, or
        ``(max, per_ms)``) caps the queue's starts, applied on the server when a worker
        starts (``jobs.declare_rate``; a rate set with ``echomq rate`` stays until removed).
        ``on_success``/``on_failure``/``on_retry``: callbacks the worker runs after the
        outcome is recorded (``echomq.runtime.callbacks``).

        Stacked with ``@app.every``/``@app.cron`` in either order, the recurrence lives on
        the task's queue and fires the task's name.
        """
        queue = keyspace.validate_queue(queue or self.default_queue)
        parts.validate(queue, partitions)
        for other in self.tasks.values():
            if other.queue == queue and other.partitions != partitions:
                raise ValueError(f"queue {queue!r} has {other.partitions} partition(s) "
                                 f"(task {other.name}); every task on it must say the same")
        if group is not None:
            group = check_group(group)
        deadline = None if expires is None else check_expires(expires)
        guard.positive("max_attempts", max_attempts)
        guard.span("retry_delay_ms", retry_delay_ms)
        guard.span("lease_ms", lease_ms, minimum=1)
        timeout_ms = seconds_to_ms("timeout", timeout)
        keep_result_ms = seconds_to_ms("keep_result", keep_result)
        if backoff is not None:
            backoff = _normalize_backoff(backoff)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"a task name must be a non-empty str, not {name!r}")
        retry_classes = exception_classes("retry_on", retry_on)
        dont_classes = exception_classes("dont_retry_on", dont_retry_on) or ()
        if not isinstance(check_args, bool):
            raise TypeError(f"check_args is True or False, not {check_args!r}")
        declared_rate = None if rate is None else rates.parse(rate)
        if declared_rate is not None:
            for other in self.tasks.values():
                if other.queue == queue and other.rate not in (None, declared_rate):
                    raise ValueError(
                        f"queue {queue!r} already has rate {rates.show(other.rate)} (task "
                        f"{other.name}); a queue has one rate: declare the same on every "
                        "task, or on one")
        callbacks = {n: callbacks_mod.check(n, f) for n, f in (
            ("on_success", on_success), ("on_failure", on_failure), ("on_retry", on_retry))}

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            inner = f if isinstance(f, Task) else None
            target = inner.fn if inner is not None else f
            if not callable(target):
                raise TypeError(f"@app.task decorates a function, not {type(target).__name__}")
            task_name = name or _default_name(target)
            if task_name in self.tasks and self.tasks[task_name].fn is not target:
                raise ValueError(f"a task named {task_name!r} is already registered")
            app: Any = self  # the App this mixin is part of
            t: Task[Any, Any] = Task(
                app, target, name=task_name, queue=queue, max_attempts=max_attempts,
                backoff=backoff, retry_delay_ms=retry_delay_ms, lease_ms=lease_ms,
                timeout_ms=timeout_ms, keep_result_ms=keep_result_ms, isolation=isolation,
                group=group,
                partitions=partitions,
                retry_on=retry_classes, dont_retry_on=dont_classes, check_args=check_args,
                rate=declared_rate, expires=deadline, **callbacks,
            )
            if inner is not None and self.tasks.get(inner.name) is inner:
                # @app.task above @app.every/@app.cron: the recurrence below registered
                # the function with the defaults; it moves to this task's queue and name
                del self.tasks[inner.name]
                self._moved(inner, t)
            self.tasks[task_name] = t
            return t

        return register(fn) if fn is not None else register

    def every(self, interval: int | dt.timedelta, *, name: str | None = None,
              args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
              jitter_ms: int = 0, exclude: Iterable[Any] = (), overlap: str = "allow",
              catchup: str | None = None, start_at: int | dt.datetime | None = None,
              end_at: int | dt.datetime | None = None, limit: int | None = None,
              ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task every ``interval`` (ms or ``timedelta``; HOST clock, or
        the server's with ``App(recurrence_clock="server")``).

        Stack it on ``@app.task`` (or on a plain function, registered with defaults). The
        registration is upserted when a worker starts and fired by the worker's Pump.
        ``jitter_ms``, ``exclude`` (dates and cron expressions whose slots do not fire),
        ``overlap`` (``allow``, ``skip``, ``buffer_one``, ``buffer_all``, ``cancel_other``),
        ``catchup``, ``start_at``, ``end_at`` and ``limit`` are ``repeat.upsert``'s, checked
        here.
        """
        every_ms = guard.span("interval", to_ms(interval), minimum=1)
        options = _steering(every_ms, None, "UTC", jitter_ms, exclude, overlap, catchup,
                            start_at, end_at, limit)

        def register(t: Any) -> Task[Any, Any]:
            task = t if isinstance(t, Task) else self.task(t)
            self._recur(task, name, args, kwargs, every_ms=every_ms, options=options)
            return task

        return register

    def cron(self, expr: str, *, tz: str = "UTC", name: str | None = None,
             args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
             jitter_ms: int = 0, exclude: Iterable[Any] = (), overlap: str = "allow",
             catchup: str | None = None, start_at: int | dt.datetime | None = None,
             end_at: int | dt.datetime | None = None, limit: int | None = None,
             ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task on a cron expression in time zone ``tz`` (see
        ``echomq.core.cron``); upserted when a worker starts, fired by its Pump. The other
        options are ``every``'s."""
        guard.string("expr", expr)
        guard.string("tz", tz)
        if not expr.split():
            raise ValueError("a cron expression must not be empty")
        # checked here, at declaration, not when a worker starts the Pump
        from echomq.core import cron as cron_mod
        try:
            cron_mod.validate(expr)
            cron_mod.zone(tz)
        except cron_mod.CronError as exc:
            raise ValueError(f"@app.cron({expr!r}, tz={tz!r}): {exc}") from None

        options = _steering(None, expr, tz, jitter_ms, exclude, overlap, catchup, start_at,
                            end_at, limit)

        def register(t: Any) -> Task[Any, Any]:
            task = t if isinstance(t, Task) else self.task(t)
            self._recur(task, name, args, kwargs, cron=expr, tz=tz, options=options)
            return task

        return register

    def _moved(self, old: Task[Any, Any], new: Task[Any, Any]) -> None:
        """Re-register ``old``'s recurrences for ``new`` (its queue, its name), keeping
        their names and arguments."""
        mine = [r for r in self.recurrences if r.task == old.name and r.queue == old.queues[0]]
        for r in mine:
            self.recurrences.remove(r)
        for r in mine:
            _, args, kwargs = decode(r.template)
            how = ({"every_ms": r.every_ms} if r.every_ms is not None
                   else {"cron": r.cron, "tz": r.tz})
            # a name the recurrence took from the old task follows the task's new name
            self._recur(new, None if r.name == old.name else r.name, args, kwargs, **how)

    def _recur(self, task: Task[Any, Any], name: str | None, args: Iterable[Any],
               kwargs: dict[str, Any] | None, **how: Any) -> None:
        reg_name = name or task.name
        if any(r.queue == task.queues[0] and r.name == reg_name for r in self.recurrences):
            raise ValueError(f"a recurrence named {reg_name!r} is already registered on "
                             f"{task.queue!r}; pass name=")
        template = encode(task.name, args, kwargs)
        # a partitioned queue's recurrence lives on (and fires into) its first partition
        self.recurrences.append(Recurrence(task.name, task.queues[0], reg_name, template,
                                           **how))


def _steering(every_ms: int | None, cron: str | None, tz: str, jitter_ms: int,
              exclude: Iterable[Any], overlap: str, catchup: str | None,
              start_at: Any, end_at: Any, limit: int | None) -> tuple[tuple[str, Any], ...]:
    """A recurrence's options beyond its cadence, checked at declaration (the upsert's own
    guards, run on a throwaway template), as ``Recurrence.options``."""
    from echomq.core.recurrence import check_exclude
    from echomq.verbs.repeat import definition

    rules = tuple(check_exclude(exclude))
    definition(b"", every_ms, cron, tz, start_at, end_at, limit, catchup, None, None,
               overlap, jitter_ms, rules)
    given = {"jitter_ms": jitter_ms or None, "exclude": rules or None,
             "overlap": None if overlap == "allow" else overlap, "catchup": catchup,
             "start_at": start_at, "end_at": end_at, "limit": limit}
    return tuple((k, v) for k, v in given.items() if v is not None)


def _default_name(fn: Callable[..., Any]) -> str:
    module = str(getattr(fn, "__module__", None) or "")
    qual = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "task"))
    return f"{module}.{qual}" if module and module != "__main__" else qual


def _normalize_backoff(policy: Any) -> Any:
    from echomq.core import backoff as backoff_mod
    return backoff_mod.normalize(policy)
