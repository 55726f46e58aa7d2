"""Tasks: the friendly layer. ``App`` names the server, ``@app.task`` declares handlers.

>>> app = App()                                   # doctest: +SKIP
>>> @app.task(queue="mail", max_attempts=5, backoff=("exponential", 1_000, 60_000))
... def send(to, subject): ...
>>> job_id = send.enqueue("a@b.c", "hi")          # now
>>> send.enqueue_in(timedelta(minutes=5), "a@b.c", "later")
>>> send.enqueue_at(datetime(2030, 1, 1, tzinfo=UTC), "a@b.c", "happy new year")
>>> app.job(job_id).state

``App(url=None)`` uses ``$ECHOMQ_URL`` when set, else an embedded Valkey (``echomq.server``)
persistent under the default data dir and detached, so it outlives the process that started
it; every later process with the same data dir finds the running server through its record
file instead of starting another (``echomq server status|stop``). A worker runs the
tasks: ``echomq worker myapp:app`` (``echomq.worker``).

The payload is JSON (stdlib ``json``: compact, keys sorted so equal calls give equal
bytes): ``{"args": [...], "kwargs": {...}, "task": "<name>"}``. An argument JSON cannot
carry raises ``TypeError`` naming it, before anything is written. A recurring
registration's template is exactly this payload (the Pump enqueues it verbatim).

Clocks: ``enqueue_in`` is priced on the SERVER clock (the schedule script adds the delay to
``TIME``); ``enqueue_at`` takes an absolute instant from the caller (a ``datetime`` is
converted with its own zone, naive = local time).
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import datetime as dt
import inspect
import itertools
import json
import logging
import os
import pathlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, overload

from . import _guards as guard
from . import backoff, ids, jobs, keyspace, registry
from . import partitions as parts
from .connector import MAX_PAYLOAD_BYTES, AsyncConnector, Connector, check_payload_limit
from .consumer import (
    DEFAULT_LEASE_MS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY_MS,
    Job,
    Route,
    to_epoch_ms,
    to_ms,
)
from .durability import Wait, confirmed
from .errors import ConfigError
from .retention import Retention
from .retention import resolve as resolve_retention
from .server import check_durability
from .steps import VerbFn

log = logging.getLogger("echomq.app")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

DEFAULT_QUEUE = "default"


# -- the payload ---------------------------------------------------------------------------


def encode(task: str, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> bytes:
    """The job payload for calling ``task(*args, **kwargs)``: compact, sorted JSON bytes.

    Raises ``TypeError`` naming the argument JSON cannot carry (nothing is written).
    """
    guard.string("task", task)
    args = list(args)
    kwargs = dict(kwargs or {})
    for where, value in [*((f"argument {i}", a) for i, a in enumerate(args)),
                         *((f"keyword argument {k!r}", v) for k, v in kwargs.items())]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _unencodable(task, where, value, exc) from None
    body = {"task": task, "args": args, "kwargs": kwargs}
    try:
        return json.dumps(body, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    except RecursionError as exc:  # an argument just under the limit, two levels deeper here
        raise _unencodable(task, "the arguments", body, exc) from None


def _unencodable(task: str, where: str, value: Any, exc: BaseException) -> TypeError:
    why = f"nested too deeply ({exc})" if isinstance(exc, RecursionError) else str(exc)
    return TypeError(f"{task}: {where} ({type(value).__name__}) is not JSON-serializable: {why}")


def decode(payload: bytes | str) -> tuple[str, list[Any], dict[str, Any]]:
    """``(task, args, kwargs)`` from a payload ``encode`` wrote (``ValueError`` otherwise)."""
    try:
        body = json.loads(payload)
        return str(body["task"]), list(body.get("args", [])), dict(body.get("kwargs", {}))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"not an EchoMQ task payload: {payload[:80]!r}") from exc


# -- job status ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's status. ``attempts`` counts claims (``failures`` the failed ones, ``delays``
    the self-delays, ``stalled`` the reaped leases). ``run_at_ms``: when a scheduled job is
    due (the schedule score: SERVER ms for ``enqueue_in``/retries/delays, caller ms for
    ``enqueue_at``)."""

    id: str
    queue: str
    state: str
    attempts: int
    error: str | None
    run_at_ms: int | None
    task: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    failures: int = 0
    stalled: int = 0
    delays: int = 0
    died_at_ms: int | None = None
    completed_at_ms: int | None = None
    row: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def run_at(self) -> dt.datetime | None:
        """``run_at_ms`` as an aware UTC ``datetime``."""
        if self.run_at_ms is None:
            return None
        return dt.datetime.fromtimestamp(self.run_at_ms / 1000, tz=dt.UTC)


def _info(queue: str, job_id: str, row: dict[str, Any], run_at: Any) -> JobInfo:
    try:
        task, args, kwargs = decode(row.get("payload", b""))
    except ValueError:
        task, args, kwargs = None, [], {}

    def num(name: str) -> int | None:
        v = row.get(name)
        return int(v) if v not in (None, "") else None

    return JobInfo(
        id=job_id, queue=queue, state=row.get("state", "?"), attempts=num("attempts") or 0,
        error=row.get("error"), run_at_ms=int(float(run_at)) if run_at is not None else None,
        task=task, args=args, kwargs=kwargs, failures=num("failures") or 0,
        stalled=num("stalled") or 0, delays=num("delays") or 0, died_at_ms=num("died_at"),
        completed_at_ms=num("completed_at"), row=row,
    )


# -- recurrence specs ----------------------------------------------------------------------


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


# -- tasks ---------------------------------------------------------------------------------


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
        partitions: int = 1,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        #: the queues this task's jobs live on: ``[queue]``, or ``queue#0`` ... for a
        #: partitioned queue (see ``echomq.partitions``)
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
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue}>"

    def options(self, *, partition_key: str | bytes | int | None = None) -> Task[P, R]:
        """This task bound to enqueue options: ``partition_key`` picks the partition of a
        partitioned queue by the key's hash, so jobs with the same key land in the same
        partition (their order and any per-key uniqueness hold there); without a key, jobs
        go round robin. ``task.options(partition_key=user_id).enqueue(...)``."""
        if partition_key is not None:
            parts.key_index(partition_key, self.partitions)  # type-checks before any I/O
        bound = copy.copy(self)
        bound._partition_key = partition_key
        return bound

    def target_queue(self) -> str:
        """The queue the next enqueue writes to: the task's queue, or for a partitioned one
        the key's partition (``options(partition_key=...)``) or the next one round robin."""
        if self.partitions == 1:
            return self.queue
        key = self._partition_key
        index = (next(self._round) % self.partitions if key is None
                 else parts.key_index(key, self.partitions))
        return self.queues[index]

    def payload(self, *args: Any, **kwargs: Any) -> bytes:
        """The payload ``enqueue`` would write for these arguments."""
        return encode(self.name, args, kwargs)

    # sync enqueue ------------------------------------------------------------------------

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run now; the job id."""
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        self.app.admit(self.app.connector(q), jobs.enqueue, q, job_id, body)
        return job_id

    def enqueue_in(self, delay: int | dt.timedelta, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run ``delay`` (ms or ``timedelta``) from SERVER now; the job id."""
        ms = guard.span("delay", to_ms(delay))
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        self.app.admit(self.app.connector(q), jobs.enqueue_in, q, job_id,
                       body, ms)
        return job_id

    def enqueue_at(self, when: int | dt.datetime, *args: P.args, **kwargs: P.kwargs) -> str:
        """Queue a run at ``when`` (epoch ms or ``datetime``, the caller's clock); the id."""
        at = to_epoch_ms(when)
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        self.app.admit(self.app.connector(q), jobs.enqueue_at, q, job_id,
                       body, at)
        return job_id

    # async enqueue -----------------------------------------------------------------------

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> str:
        """``enqueue``, awaited on the app's ``AsyncConnector``."""
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        await self.app.admit(await self.app.aconnector(q), jobs.enqueue, q,
                             job_id, body)
        return job_id

    async def aenqueue_in(self, delay: int | dt.timedelta, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        ms = guard.span("delay", to_ms(delay))
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        await self.app.admit(await self.app.aconnector(q), jobs.enqueue_in,
                             q, job_id, body, ms)
        return job_id

    async def aenqueue_at(self, when: int | dt.datetime, *args: P.args,
                          **kwargs: P.kwargs) -> str:
        at = to_epoch_ms(when)
        job_id, body = ids.mint(), self.payload(*args, **kwargs)
        q = self.target_queue()
        await self.app.admit(await self.app.aconnector(q), jobs.enqueue_at,
                             q, job_id, body, at)
        return job_id

    # running -----------------------------------------------------------------------------

    def route(self, args: list[Any], kwargs: dict[str, Any]) -> Route:
        """How a consumer runs one job of this task with these decoded arguments."""
        fn: Callable[..., Any] = self.fn
        if inspect.iscoroutinefunction(fn):
            async def handler(_job: Job) -> Any:
                return await fn(*args, **kwargs)
        else:
            def handler(_job: Job) -> Any:  # type: ignore[misc]
                return fn(*args, **kwargs)
        return Route(handler, self.max_attempts, self.backoff, self.retry_delay_ms,
                     self.lease_ms, name=self.name)


class App:
    """A registry of tasks bound to one server.

    ``url``: a server URL; ``None`` reads ``$ECHOMQ_URL`` and, failing that, starts (or
    finds) the embedded server under ``data_dir`` (persistent unless ``ephemeral``). That
    server is detached: it keeps running after this process exits (``echomq server stop``
    ends it); ``ephemeral=True`` starts a throwaway one that ``close()`` (or exit) stops.
    ``durability``: ``"everysec"`` (default) or ``"always"`` (fsync before every reply),
    for the embedded server only; an external server's fsync policy is its own config.
    ``keep_completed`` (a count) / ``keep_completed_for`` (ms or ``timedelta``) keep
    completed rows within those bounds; ``retention`` takes a full ``Retention`` instead.
    ``retention``: what workers keep of finished jobs (``Retention``; completed rows are
    deleted on ack by default, dead ones kept 30 days).
    ``wait_replicas`` / ``wait_local`` / ``wait_timeout_ms``: every enqueue waits (``WAIT`` /
    ``WAITAOF``, see ``echomq.durability``) until that many replicas (and the primary's own
    fsync) have it, or raises ``errors.NotDurable`` after the timeout (the job is admitted
    on the primary; ``exc.result``). Off by default: one round trip, AOF as configured.
    ``max_payload_bytes``: the largest payload (encoded arguments) an enqueue sends, 64 MiB
    by default and at most 512 MiB; a larger one raises ``errors.PayloadTooLarge`` (a
    ``ValueError``) naming the size and the limit, before anything is sent.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        wire: int = 4,
        data_dir: str | os.PathLike[str] | None = None,
        ephemeral: bool = False,
        default_queue: str = DEFAULT_QUEUE,
        retention: Retention | None = None,
        keep_completed: int | None = None,
        keep_completed_for: int | dt.timedelta | None = None,
        durability: str | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        wait_replicas: int = 0,
        wait_local: bool = False,
        wait_timeout_ms: int = 1_000,
    ) -> None:
        keyspace.validate_queue(default_queue)
        self.durability = check_durability(durability)
        if ephemeral and durability is not None:
            raise ConfigError("an ephemeral server keeps nothing: durability does not apply")
        if url is not None and durability is not None:
            raise ConfigError("durability is for the embedded server; the server at the URL "
                              "keeps its own appendfsync setting")
        self.max_payload_bytes = check_payload_limit(max_payload_bytes)
        self.wait = (Wait(wait_replicas, wait_local, wait_timeout_ms)
                     if wait_replicas or wait_local else None)
        self._url = url
        self.wire = wire
        self.data_dir = pathlib.Path(data_dir) if data_dir is not None else None
        self.ephemeral = ephemeral
        self.default_queue = default_queue
        self.retention = resolve_retention(retention, keep_completed, keep_completed_for)
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.recurrences: list[Recurrence] = []
        self.server: Any = None  # the ephemeral EmbeddedServer this app started, if any
        self.server_record: Any = None  # the data dir's record of the implicit server used
        self._conn: Connector | None = None
        self._stop_server: Callable[[], None] | None = None
        self._aconns: dict[int, tuple[asyncio.AbstractEventLoop, AsyncConnector]] = {}

    def admit(self, conn: Any, verb: VerbFn[..., T], *args: Any) -> Any:
        """Run the admission ``verb`` on ``conn`` under this app's ``wait``, if any (the
        result on a sync connector, an awaitable on an async one)."""
        if self.wait is None:
            return verb(conn, *args)
        return confirmed(conn, verb.steps(*args), self.wait)

    # -- the server ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server URL, starting or finding the embedded server on first use."""
        if self._url is None:
            external = os.environ.get("ECHOMQ_URL")
            if external and self.durability is not None:
                log.warning("durability=%r applies to the embedded server only; the server "
                            "at $ECHOMQ_URL keeps its own appendfsync", self.durability)
            self._url = external or self._embedded()
        return str(self._url)

    @url.setter
    def url(self, value: str) -> None:
        self._url = value

    def _embedded(self) -> str:
        from .server import EmbeddedServer

        if self.ephemeral:
            srv = EmbeddedServer(ephemeral=True, data_dir=self.data_dir)
            srv.start()
            self._own(srv)
            return srv.url
        # the data dir's server, started detached if none answers: it outlives this process
        found = EmbeddedServer.find_or_start(self.data_dir, durability=self.durability)
        self.server_record = found
        return found.url

    def _own(self, srv: Any) -> None:
        self.server = srv

        def stop() -> None:
            srv.stop()

        self._stop_server = stop
        atexit.register(stop)

    def connector(self, queue: str | None = None) -> Connector:
        """The app's sync connector (made on first use); naming ``queue`` registers it in
        the queue registry once per connector (``registry.note``)."""
        if self._conn is None:
            self._conn = Connector.connect(self.url, wire=self.wire,
                                           max_payload_bytes=self.max_payload_bytes)
        if queue is not None:
            registry.note(self._conn, queue)
        return self._conn

    async def aconnector(self, queue: str | None = None) -> AsyncConnector:
        """The app's async connector for the running event loop (made on first use);
        ``queue`` as in ``connector``."""
        loop = asyncio.get_running_loop()
        held = self._aconns.get(id(loop))
        if held is None or held[0] is not loop:
            url = self.url
            held = (loop, await AsyncConnector.connect(
                url, wire=self.wire, max_payload_bytes=self.max_payload_bytes))
            self._aconns[id(loop)] = held
        if queue is not None:
            await registry.anote(held[1], queue)
        return held[1]

    def close(self) -> None:
        """Close the sync connector and stop the embedded server this app started."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._aconns.clear()
        stop = self._stop_server
        if stop is not None:
            atexit.unregister(stop)
            stop()
            self._stop_server = None
            self.server = None

    async def aclose(self) -> None:
        held = self._aconns.pop(id(asyncio.get_running_loop()), None)
        if held is not None:
            await held[1].close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- declaring tasks -----------------------------------------------------------------

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
        partitions: int = 1,
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
        partitions: int = 1,
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
        partitions: int = 1,
    ) -> Any:
        """Register a task (``@app.task`` or ``@app.task(queue=..., ...)``).

        ``max_attempts`` (default 25) runs before dead-lettering; a failure is retried after
        ``retry_delay_ms`` (default 1000) or, with ``backoff``, after
        ``backoff.delay_ms(policy, attempts)``; ``lease_ms`` (default 30 s) is the lease a
        running job holds, checkpointed every third of it. ``partitions=8`` spreads the
        queue over ``queue#0`` ... ``queue#7``, each its own hash tag (a cluster spreads
        them over its primaries; see ``echomq.partitions`` and ``Task.options``).
        """
        queue = keyspace.validate_queue(queue or self.default_queue)
        parts.validate(queue, partitions)
        for other in self.tasks.values():
            if other.queue == queue and other.partitions != partitions:
                raise ValueError(f"queue {queue!r} has {other.partitions} partition(s) "
                                 f"(task {other.name}); every task on it must say the same")
        guard.positive("max_attempts", max_attempts)
        guard.span("retry_delay_ms", retry_delay_ms)
        guard.span("lease_ms", lease_ms, minimum=1)
        if backoff is not None:
            _validate_backoff(backoff)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"a task name must be a non-empty str, not {name!r}")

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            target = f.fn if isinstance(f, Task) else f
            if not callable(target):
                raise TypeError(f"@app.task decorates a function, not {type(target).__name__}")
            task_name = name or _default_name(target)
            if task_name in self.tasks and self.tasks[task_name].fn is not target:
                raise ValueError(f"a task named {task_name!r} is already registered")
            t: Task[Any, Any] = Task(
                self, target, name=task_name, queue=queue, max_attempts=max_attempts,
                backoff=backoff, retry_delay_ms=retry_delay_ms, lease_ms=lease_ms,
                partitions=partitions,
            )
            self.tasks[task_name] = t
            return t

        return register(fn) if fn is not None else register

    def every(self, interval: int | dt.timedelta, *, name: str | None = None,
              args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None
              ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task every ``interval`` (ms or ``timedelta``; HOST clock).

        Stack it on ``@app.task`` (or on a plain function, registered with defaults). The
        registration is upserted when a worker starts and fired by the worker's Pump.
        """
        every_ms = guard.span("interval", to_ms(interval), minimum=1)

        def register(t: Any) -> Task[Any, Any]:
            task = t if isinstance(t, Task) else self.task(t)
            self._recur(task, name, args, kwargs, every_ms=every_ms)
            return task

        return register

    def cron(self, expr: str, *, tz: str = "UTC", name: str | None = None,
             args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None
             ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task on a cron expression in time zone ``tz`` (see
        ``echomq.cron``); upserted when a worker starts, fired by its Pump."""
        guard.string("expr", expr)
        guard.string("tz", tz)
        if not expr.split():
            raise ValueError("a cron expression must not be empty")
        # checked here, at declaration, not when a worker starts the Pump
        from . import cron as cron_mod

        try:
            cron_mod.validate(expr)
            cron_mod.zone(tz)
        except cron_mod.CronError as exc:
            raise ValueError(f"@app.cron({expr!r}, tz={tz!r}): {exc}") from None

        def register(t: Any) -> Task[Any, Any]:
            task = t if isinstance(t, Task) else self.task(t)
            self._recur(task, name, args, kwargs, cron=expr, tz=tz)
            return task

        return register

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

    # -- what workers need ---------------------------------------------------------------

    def queues(self) -> list[str]:
        """Every queue a task of this app lives on (declaration order; a partitioned
        queue as its partitions, ``mail#0`` ...)."""
        return list(dict.fromkeys(q for t in self.tasks.values() for q in t.queues))

    def expand(self, queues: Iterable[str]) -> list[str]:
        """Queue names with each partitioned queue of this app (``mail``) replaced by its
        partitions (``mail#0`` ...); other names as given."""
        split = {t.queue: t.queues for t in self.tasks.values()}
        return list(dict.fromkeys(p for q in queues for p in split.get(q, [q])))

    def lease_for(self, queue: str) -> int:
        """The claim lease for ``queue``: the shortest task lease on it, so a short-lease
        task is reaped on time if its worker dies before the first checkpoint."""
        leases = [t.lease_ms for t in self.tasks.values() if queue in t.queues]
        return min(leases) if leases else DEFAULT_LEASE_MS

    def router(self, queue: str) -> Callable[[Job], Route]:
        """The consumer router for ``queue``: payload → task → ``Route``."""

        def route(job: Job) -> Route:
            name, args, kwargs = decode(job.payload)
            task = self.tasks.get(name)
            if task is None:
                known = ", ".join(sorted(self.tasks)) or "none"
                raise LookupError(f"unknown task {name!r}: this app has no task of that "
                                  f"name (its tasks: {known})")
            return task.route(args, kwargs)

        return route

    # -- enqueue by name and status ------------------------------------------------------

    def enqueue(self, task: str, *args: Any, **kwargs: Any) -> str:
        """Queue the registered task named ``task`` now; the job id."""
        return self._named(task).enqueue(*args, **kwargs)

    def _named(self, task: str) -> Task[Any, Any]:
        try:
            return self.tasks[task]
        except KeyError:
            raise LookupError(
                f"no task named {task!r}; known: {', '.join(sorted(self.tasks)) or 'none'}"
            ) from None

    def job(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """A job's status (state, attempts, last error, run-at), looked up on ``queue`` or on
        every queue of this app; ``None`` when no row exists (never enqueued, or deleted
        after completion under the default retention)."""
        guard.string("job_id", job_id)
        conn = self.connector()
        for q in [queue] if queue else (self.queues() or [self.default_queue]):
            row = jobs.get(conn, q, job_id)
            if row:
                score = conn.call("ZSCORE", keyspace.queue_key(q, "schedule"), job_id)
                return _info(q, job_id, row, score)
        return None

    async def ajob(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """``job``, awaited."""
        guard.string("job_id", job_id)
        conn = await self.aconnector()
        for q in [queue] if queue else (self.queues() or [self.default_queue]):
            row: dict[str, Any] | None = await jobs.get(conn, q, job_id)
            if row:
                score = await conn.call("ZSCORE", keyspace.queue_key(q, "schedule"), job_id)
                return _info(q, job_id, row, score)
        return None


def _default_name(fn: Callable[..., Any]) -> str:
    module = str(getattr(fn, "__module__", None) or "")
    qual = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "task"))
    return f"{module}.{qual}" if module and module != "__main__" else qual


def _validate_backoff(policy: Any) -> None:
    from . import backoff as backoff_mod

    backoff_mod.validate(policy)


