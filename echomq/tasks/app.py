"""Tasks: the friendly layer. ``App`` names the server, ``@app.task`` declares handlers.

>>> app = App()                                   # doctest: +SKIP
>>> @app.task(queue="mail", max_attempts=5, backoff=("exponential", 1_000, 60_000))
... def send(to, subject): ...
>>> job_id = send.enqueue("a@b.c", "hi")          # now
>>> send.enqueue_in(timedelta(minutes=5), "a@b.c", "later")
>>> send.enqueue_at(datetime(2030, 1, 1, tzinfo=UTC), "a@b.c", "happy new year")
>>> app.job(job_id).state

``App(url=None)`` uses ``$ECHOMQ_URL`` when set, else an embedded Valkey (``embedded.server``)
persistent under the default data dir and detached, so it outlives the process that started
it; every later process with the same data dir finds the running server through its record
file instead of starting another (``echomq server status|stop``). A worker runs the
tasks: ``echomq worker myapp:app`` (``echomq.tasks.worker``).

The payload is JSON (``echomq.core.payload``); ``Task`` lives in ``echomq.tasks.task``, the
options ``@app.task`` checks in ``echomq.tasks.defaults``, the app's tasks and recurrences in
its ``registry`` (``echomq.tasks.declare``); waiting for a job's end and its kept result in
``echomq.verbs.results``. ``App`` is the ``Producer`` its tasks submit their admission
plans to (``echomq.tasks.producer``).

Units: a schedule quantity (a delay, an interval, a backoff, a lease, ``expires``, a
debounce window) is milliseconds as a bare int; a wait or a retention (``timeout``,
``keep_result``, ``unique_for``, ``app.result(timeout=)``) is seconds as a bare number; a
``timedelta`` is accepted for each.

Clocks: ``enqueue_in`` is priced on the SERVER clock (the schedule script adds the delay to
``TIME``); ``enqueue_at`` takes an absolute instant from the caller (a ``datetime`` is
converted with its own zone, naive = local time).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ParamSpec, TypeVar, Unpack, cast, overload

from echomq.connectors.plan import (
    DEFAULT_TIMEOUT_S,
    MAX_PAYLOAD_BYTES,
)
from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.cron import CronError
from echomq.core.outcomes import Outcome
from echomq.core.payload import Serializer
from echomq.core.times import to_ms
from echomq.runtime.events import Observer
from echomq.runtime.handler import Job
from echomq.runtime.route import Route
from echomq.tasks import batches as batching
from echomq.tasks import canvas, routing
from echomq.tasks.client import Client
from echomq.tasks.declare import Recurrence, Registry
from echomq.tasks.defaults import TaskDefaults, TaskOptions
from echomq.tasks.lifecycle import Hook
from echomq.tasks.retrying import DEFAULT_RETRY_FOR
from echomq.tasks.settings import DEFAULT_QUEUE, AppKeywords, AppSettings
from echomq.tasks.task import Task
from echomq.verbs import batches, durable, flows, results, status
from echomq.verbs.batches import BatchInfo
from echomq.verbs.durable import DEFAULT_SIGNAL_TTL_MS
from echomq.verbs.repeat import Definition
from echomq.verbs.retention import Retention
from echomq.verbs.status import JobInfo

__all__ = ["App"]

log = logging.getLogger("echomq.app")

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

class App(Client):
    """A registry of tasks bound to one server.

    Where the server is and how it is reached (``url``, ``data_dir``, ``ephemeral``,
    ``durability``, ``wait_*``, ``wire``, ``max_payload_bytes``, ``tls_*``, ``timeout``,
    ``retry_for``): see ``Client``, which this class extends.

    ``keep_completed`` (a count) / ``keep_completed_for`` (ms or ``timedelta``) keep
    completed rows within those bounds; ``retention`` takes a full ``Retention`` instead.
    ``retention``: what workers keep of finished jobs (``Retention``; completed rows are
    deleted on ack by default, dead ones kept 30 days). ``on_event``: an observer every
    worker of this app hands its timeline to (``echomq.runtime.events``).
    ``recurrence_clock``: ``"host"`` (the default, as the specification prices the
    registry: keep Pump hosts on NTP) or ``"server"``: a worker's Pump plans and upserts
    the recurrences on the server's ``TIME`` (cron's calendar math stays on the host, in
    the zone), so a Pump host whose clock is off fires on the server's time.
    ``keep_errors``: how many failures each job keeps in its history (``app.job(id).errors``,
    each with its traceback; by default the retention's ``keep_errors``, 10; 0 keeps none;
    the last one's traceback is kept either way). ``on_startup`` / ``on_shutdown``: called
    (sync or ``async``) once per worker process with its context, a
    ``types.SimpleNamespace`` the hook fills and handlers read as ``current_job().context``
    (``echomq.tasks.lifecycle``).
    ``signal_ttl`` (SECONDS, or a ``timedelta``; default a day): how long ``app.signal``
    keeps a signal for the durable waits that begin after it (SERVER clock).
    ``codec``: ``echomq.codecs.Zlib()``, ``Fernet(keys=[new, old])`` or a list/``chain`` of
    them, wrapping every payload this app writes (``echomq.core.codecs``).
    ``serializer``: what turns arguments and kept results into text (``dumps``/``loads``);
    the default is JSON plus tagged datetime, date, UUID, Decimal, Enum, dataclasses and
    pydantic models (``echomq.core.serial``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        wire: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        ephemeral: bool = False,
        default_queue: str = DEFAULT_QUEUE,
        retention: Retention | None = None,
        keep_completed: int | None = None,
        keep_completed_for: int | dt.timedelta | None = None,
        on_event: Observer | None = None,
        durability: str | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        wait_replicas: int = 0,
        wait_local: bool = False,
        wait_timeout_ms: int = 1_000,
        tls_ca: str | os.PathLike[str] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_verify: str | None = None,
        recurrence_clock: str = "host",
        keep_errors: int | None = None,
        on_startup: Hook | None = None,
        on_shutdown: Hook | None = None,
        signal_ttl: float | dt.timedelta = DEFAULT_SIGNAL_TTL_MS / 1000,
        codec: Any = None,
        serializer: Serializer | None = None,
        timeout: float | dt.timedelta | None = DEFAULT_TIMEOUT_S,
        retry_for: float | dt.timedelta | None = DEFAULT_RETRY_FOR,
    ) -> None:
        # the keywords as given, checked once, together, before anything is made: the
        # signature above is the public one (names, types, defaults), AppSettings.of the checks
        given = dict(locals())  # first: the parameters and nothing else
        given.pop("self"), given.pop("__class__", None)  # (super()'s cell)
        settings = AppSettings.of(cast(AppKeywords, given))
        super().__init__(settings)
        #: the clock a worker's Pump plans the recurrences on (and upserts them from):
        #: ``"host"`` (the specification's registry clock) or ``"server"`` (the server's
        #: ``TIME``, read once per sweep: a host clock that is off no longer shifts them)
        self.recurrence_clock = settings.recurrence_clock
        #: how long (ms) ``signal`` keeps a signal for the waits that begin after it
        self.signal_ttl_ms = settings.signal_ttl_ms
        self.default_queue = settings.default_queue
        self.retention = settings.retention
        #: run once per worker process, before its first claim and after its drain
        #: (``echomq.tasks.lifecycle``)
        self.on_startup, self.on_shutdown = settings.on_startup, settings.on_shutdown
        self.on_event = settings.on_event  # the workers' observer unless they get one
        #: the app's tasks by name and its recurrences (``echomq.tasks.declare``)
        self.registry = Registry(self, settings.default_queue)
        #: how this app's payloads and kept results are written (``serializer=``, ``codec=``)
        self.format = settings.format

    @property
    def tasks(self) -> dict[str, Task[Any, Any]]:
        """The registered tasks by name (``registry.tasks``)."""
        return self.registry.tasks

    @property
    def recurrences(self) -> list[Recurrence]:
        """The declared recurrences (``registry.recurrences``)."""
        return self.registry.recurrences

    # -- declaring: tasks and recurrences ------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], **options: Unpack[TaskOptions]) -> Task[P, R]: ...

    @overload
    def task(self, fn: None = None, **options: Unpack[TaskOptions]
             ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(self, fn: Callable[..., Any] | None = None, **options: Unpack[TaskOptions]
             ) -> Any:
        """Register a task (``@app.task`` or ``@app.task(queue=..., ...)``); its options
        are checked here, once (``echomq.tasks.defaults.TaskDefaults``).

        ``queue`` (default: the app's ``default_queue``), ``name`` (default: the
        function's module and qualname). ``max_attempts`` (default 25) runs before
        dead-lettering; a failure is retried after ``retry_delay_ms`` (MILLISECONDS,
        default 1000) or, with ``backoff``, after ``backoff.delay_ms(policy, attempts)``
        (a list of delays is ms or ``timedelta``s, the last repeats); ``lease_ms``
        (MILLISECONDS, default 30 s) is the lease a running job holds, checkpointed every
        third of it.

        ``timeout`` (SECONDS as a bare number, or a ``timedelta``; default: the worker's,
        off unless set): an async handler is cancelled at the deadline, a plain function
        is abandoned in its thread and its slot freed; the attempt fails with a
        ``TimeoutError`` text and retries like any failure. ``keep_result`` (SECONDS, or a
        ``timedelta``; ``keep_result=3600`` is an hour): keep the JSON return value that
        long (``app.job(id).result``, ``app.result(id)``); a value of 86,400,000 or more
        warns (it reads as milliseconds meant). ``expires`` (MILLISECONDS after admission
        or a ``timedelta``, SERVER clock; or a ``datetime``): a run not started by then
        ends ``expired``.

        ``isolation="process"`` runs a plain function in a killable child process per job
        (``echomq.runtime.isolation``). ``partitions=8`` spreads the queue over
        ``queue#0`` ... ``queue#7``, each its own hash tag (``echomq.core.partitions``,
        ``Task.options``). ``group``: the lane every run joins (``echomq.verbs.groups``),
        a name or a function of the task's arguments called at each enqueue (it may
        return ``None`` for no group); ``task.options(group=...)`` overrides it.

        Errors (``echomq.runtime.verdict``): every exception retries by default;
        ``retry_on=(OSError, ...)`` retries only those (subclasses included) and
        ``dont_retry_on=(ValueError, ...)`` never retries those (it wins over ``retry_on``).
        ``check_args=False`` skips binding each enqueue's arguments to the function's
        signature (``echomq.tasks.arguments``). ``rate="10/s"`` (``MAX/DURATION``, or
        ``(max, per_ms)``) caps the queue's starts, applied on the server when a worker
        starts (``jobs.declare_rate``). ``on_success``/``on_failure``/``on_retry``:
        callbacks the worker runs after the outcome is recorded
        (``echomq.runtime.callbacks``).

        Stacked with ``@app.every``/``@app.cron`` in either order, the recurrence lives on
        the task's queue and fires the task's name.
        """
        declared = TaskDefaults.of(self.default_queue, **options)
        self.registry.check(declared)

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            return self.registry.declare(f, declared)

        return register(fn) if fn is not None else register

    def every(self, interval: int | dt.timedelta, *, name: str | None = None,
              args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
              jitter_ms: int = 0, exclude: Iterable[Any] = (), overlap: str = "allow",
              catchup: str | None = None, start_at: int | dt.datetime | None = None,
              end_at: int | dt.datetime | None = None, limit: int | None = None,
              ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task every ``interval`` (MILLISECONDS as a bare int, or a
        ``timedelta``; HOST clock, or the server's with ``App(recurrence_clock="server")``).

        Stack it on ``@app.task`` (or on a plain function, registered with defaults). The
        registration is upserted when a worker starts and fired by the worker's Pump.
        ``jitter_ms`` (ms), ``exclude`` (dates and cron expressions whose slots do not
        fire), ``overlap`` (``allow``, ``skip``, ``buffer_one``, ``buffer_all``,
        ``cancel_other``), ``catchup``, ``start_at``, ``end_at`` and ``limit`` are
        ``repeat.upsert``'s, checked here, once (``repeat.Definition``).
        """
        every_ms = guard.span("interval", to_ms(interval), minimum=1)
        spec = Definition.of(template=b"", every_ms=every_ms, jitter_ms=jitter_ms,
                             exclude=exclude, overlap=overlap, catchup=catchup,
                             start_at=start_at, end_at=end_at, limit=limit)
        return self.registry.recur(spec, name, args, kwargs)

    def cron(self, expr: str, *, tz: str = "UTC", name: str | None = None,
             args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
             jitter_ms: int = 0, exclude: Iterable[Any] = (), overlap: str = "allow",
             catchup: str | None = None, start_at: int | dt.datetime | None = None,
             end_at: int | dt.datetime | None = None, limit: int | None = None,
             ) -> Callable[[Any], Task[Any, Any]]:
        """Run the decorated task on a cron expression in time zone ``tz`` (see
        ``echomq.core.cron``); upserted when a worker starts, fired by its Pump. The other
        options are ``every``'s; all are checked here, once (``repeat.Definition``)."""
        guard.string("expr", expr)
        guard.string("tz", tz)
        if not expr.split():
            raise ValueError("a cron expression must not be empty")
        try:
            spec = Definition.of(template=b"", cron=expr, tz=tz, jitter_ms=jitter_ms,
                                 exclude=exclude, overlap=overlap, catchup=catchup,
                                 start_at=start_at, end_at=end_at, limit=limit)
        except CronError as exc:
            raise ValueError(f"@app.cron({expr!r}, tz={tz!r}): {exc}") from None
        return self.registry.recur(spec, name, args, kwargs)

    def partitions_of(self, queue: str) -> int:
        """How many partitions ``queue`` has in this app (a task's on it, else 1)."""
        return self.registry.partitions_of(queue)

    # -- what workers need ---------------------------------------------------------------

    def queues(self) -> list[str]:
        """Every queue a task of this app lives on (``registry.queues``)."""
        return self.registry.queues()

    def expand(self, queues: Iterable[str]) -> list[str]:
        """``queues`` with each partitioned queue replaced by its partitions
        (``registry.expand``)."""
        return self.registry.expand(queues)

    def served(self, queues: Iterable[str]) -> dict[str, list[str]]:
        """What a worker serving ``queues`` consumes (``registry.served``)."""
        return self.registry.served(queues)

    def lease_for(self, queue: str) -> int:
        """The claim lease for ``queue`` (``registry.lease_for``)."""
        return self.registry.lease_for(queue)

    def router(self, queue: str) -> Callable[[Job], Route]:
        """The consumer router for ``queue``: payload -> task -> ``Route``
        (``echomq.tasks.routing``)."""
        return routing.router(self.registry.tasks, self.format)

    # -- flows ---------------------------------------------------------------------------

    def flow(self, parent: canvas.Signature,
             children: Iterable[canvas.Signature | canvas.Flow] = ()) -> str:
        """Admit ``parent`` with ``children`` (signatures or flows, each in its task's
        queue) as one flow: the children run, the parent runs once after the last has
        ended and reads them with ``current_job().children()``. The parent's job id.
        ``app.flow(report.s(month), children=[fetch.s(p) for p in pages])``."""
        return canvas.flow(parent, list(children)).enqueue()

    async def aflow(self, parent: canvas.Signature,
                    children: Iterable[canvas.Signature | canvas.Flow] = ()) -> str:
        """``flow``, awaited."""
        return await canvas.flow(parent, list(children)).aenqueue()

    # -- batches ---------------------------------------------------------------------------

    def batch(self, *, on_complete: canvas.Signature | None = None,
              on_success: canvas.Signature | None = None,
              on_death: canvas.Signature | None = None) -> batching.Batch:
        """A batch (``with app.batch(...) as b: b.add(send.s(1))``; see
        ``echomq.tasks.batches``): each callback runs once, a job on its signature's queue,
        called with its arguments and the ``BatchInfo`` as a dict."""
        return batching.Batch(self, on_complete=on_complete, on_success=on_success,
                              on_death=on_death)

    def batch_info(self, batch_id: str) -> BatchInfo | None:
        """A batch's ``BatchInfo(total, pending, completed, dead, closed)``; ``None`` for an
        unknown (or expired: a week after it ended) batch."""
        return batches.info(self.connector(), batch_id)

    def add_to_batch(self, batch_id: str, sigs: Sequence[canvas.Signature]) -> list[str]:
        """Enroll and admit ``sigs`` in batch ``batch_id`` (``current_job().batch.add``)."""
        return self.submit(batching.members_plan(batch_id, sigs))

    # -- enqueue by name and status ------------------------------------------------------

    def enqueue(self, task: str, *args: Any, **kwargs: Any) -> str:
        """Queue the registered task named ``task`` now; the job id."""
        return self.registry.named(task).enqueue(*args, **kwargs)

    def _lookup(self, queue: str | None) -> list[str]:
        return [keyspace.validate_queue(queue)] if queue else (
            self.queues() or [self.default_queue])

    def job(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """A job's status (state, attempts, last error, run-at, progress, kept result),
        looked up on ``queue``, else on any queue the server knows; ``None`` when neither a row
        nor a kept result exists (never enqueued, or deleted after completion under the
        default retention and no result kept)."""
        guard.string("job_id", job_id)  # before a connection (which may start a server)
        return status.lookup(self.connector(), job_id, self._lookup(queue), queue is not None,
                             self.format)

    async def ajob(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """``job``, awaited."""
        guard.string("job_id", job_id)
        return await status.lookup(await self.aconnector(), job_id, self._lookup(queue),
                                   queue is not None, self.format)

    # -- durable signals (echomq.verbs.durable) ------------------------------------------

    def signal(self, key: str, payload: Any = None) -> int:
        """Send signal ``key``: every job waiting for it (``current_job().wait_for(key)``),
        on any queue, resumes with ``payload`` (JSON) as that step's result; the count
        resumed. The signal is kept ``signal_ttl`` (SERVER clock) for the waits that begin
        later, which take it at once, so none is lost to a race."""
        return durable.signal(self.connector(), key, _signal_text(payload), self.signal_ttl_ms)

    async def asignal(self, key: str, payload: Any = None) -> int:
        """``signal``, awaited."""
        return await durable.signal(await self.aconnector(), key, _signal_text(payload),
                                    self.signal_ttl_ms)

    # -- results and cancel --------------------------------------------------------------

    def result(self, job_id: str, timeout: float | dt.timedelta | None = None, *,
               queue: str | None = None) -> Any:
        """Wait for the job to end and return its kept value (``None`` when its task keeps
        none). Blocks on the job's end token (no tight polling; see ``echomq.verbs.results``).
        Raises ``errors.JobFailed`` if it died, ``errors.JobCancelled`` if it was
        cancelled, ``TimeoutError`` after ``timeout`` seconds (``None``: wait for ever),
        ``errors.JobNotFound`` if no queue of this app knows it."""
        guard.string("job_id", job_id)
        conn = self.connector()
        return results.wait_found(conn, job_id, self._lookup(queue), queue is not None,
                                  results.timeout_s(timeout), self.format,
                                  conn.block_for(results.BLOCK_S))

    async def aresult(self, job_id: str, timeout: float | dt.timedelta | None = None, *,
                      queue: str | None = None) -> Any:
        """``result``, awaited."""
        guard.string("job_id", job_id)
        conn = await self.aconnector()
        return await results.wait_found(conn, job_id, self._lookup(queue), queue is not None,
                                        results.timeout_s(timeout), self.format,
                                        conn.block_for(results.BLOCK_S))

    def cancel(self, job_id: str, *, queue: str | None = None) -> Outcome:
        """Cancel a job: ``"cancelled"`` (it was waiting: removed), ``"requested"`` (it is
        running: its holder stops it at its next lease checkpoint and it ends
        ``cancelled``) or ``"absent"`` (unknown, finished or dead). Tries ``queue`` or
        each of this app's queues until one knows the id. A flow parent still waiting for
        its children is cancelled with its waiting subtree (``flows.cancel``)."""
        guard.string("job_id", job_id)  # before a connection (which may start a server)
        return flows.cancel_among(self.connector(), self._lookup(queue), job_id)

    async def acancel(self, job_id: str, *, queue: str | None = None) -> Outcome:
        """``cancel``, awaited."""
        guard.string("job_id", job_id)
        return await flows.cancel_among(await self.aconnector(), self._lookup(queue), job_id)


def _signal_text(payload: Any) -> str:
    try:
        return json.dumps(payload, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a signal's payload must be JSON-serializable: {exc}") from None
