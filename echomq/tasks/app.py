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

The payload is JSON (``echomq.core.payload``); ``Task`` lives in ``echomq.tasks.task``, declaring
tasks and recurrences (``@app.task``, ``@app.every``, ``@app.cron``) in ``echomq.tasks.declare``;
waiting for a job's end and its kept result in ``echomq.verbs.results``.

Clocks: ``enqueue_in`` is priced on the SERVER clock (the schedule script adds the delay to
``TIME``); ``enqueue_at`` takes an absolute instant from the caller (a ``datetime`` is
converted with its own zone, naive = local time).
"""

from __future__ import annotations

import asyncio
import atexit
import datetime as dt
import logging
import os
import pathlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from echomq.connectors import urls
from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.connector import Connector
from echomq.connectors.plan import (
    AUTO,
    MAX_PAYLOAD_BYTES,
    check_payload_limit,
    check_wire,
    tls_options,
)
from echomq.core import guards as guard
from echomq.core import keyspace
from echomq.core.errors import ConfigError, NotDurable
from echomq.core.outcomes import Outcome
from echomq.core.payload import decode
from echomq.core.steps import VerbFn
from echomq.embedded.launch import check_durability
from echomq.runtime import tracing
from echomq.runtime.events import Observer
from echomq.runtime.handler import Job
from echomq.runtime.route import DEFAULT_LEASE_MS, Route, UnknownTask
from echomq.tasks import canvas
from echomq.tasks.declare import Declarations, Recurrence
from echomq.tasks.task import Task
from echomq.verbs import flows, registry, results, status
from echomq.verbs.durability import Wait, confirmed
from echomq.verbs.retention import Retention
from echomq.verbs.retention import resolve as resolve_retention
from echomq.verbs.status import JobInfo

__all__ = ["App"]

log = logging.getLogger("echomq.app")

T = TypeVar("T")

DEFAULT_QUEUE = "default"


class App(Declarations):
    """A registry of tasks bound to one server.

    ``url``: a server URL; ``None`` reads ``$ECHOMQ_URL`` and, failing that, starts (or
    finds) the embedded server under ``data_dir`` (persistent unless ``ephemeral``). An
    empty URL (``App("")``, ``ECHOMQ_URL=``) is no URL, here and in every command. That
    server is detached: it keeps running after this process exits (``echomq server stop``
    ends it); ``ephemeral=True`` starts a throwaway one that ``close()`` (or exit) stops.
    ``durability``: ``"everysec"`` (default) or ``"always"`` (fsync before every reply),
    for the embedded server only; an external server's fsync policy is its own config.
    ``keep_completed`` (a count) / ``keep_completed_for`` (ms or ``timedelta``) keep
    completed rows within those bounds; ``retention`` takes a full ``Retention`` instead.
    ``retention``: what workers keep of finished jobs (``Retention``; completed rows are
    deleted on ack by default, dead ones kept 30 days). ``on_event``: an observer every
    worker of this app hands its timeline to (``echomq.runtime.events``).
    ``wait_replicas`` / ``wait_local`` / ``wait_timeout_ms``: every enqueue waits (``WAIT`` /
    ``WAITAOF``, see ``echomq.verbs.durability``) until that many replicas (and the primary's own
    fsync) have it, or raises ``errors.NotDurable`` after the timeout (the job is admitted
    on the primary; ``exc.result``). Off by default: one round trip, AOF as configured.
    ``wire``: ``None`` (default) picks wire 6 (the EMQ module's native commands) when every
    node of the server has the module loaded, as the embedded server does, and wire 4
    (scripts) otherwise, at the first connect (``wire_reason`` says which and why); 4 or 6
    chooses (6 is refused at connect where the module is missing).
    ``max_payload_bytes``: the largest payload (encoded arguments) an enqueue sends, 64 MiB
    by default and at most 512 MiB; a larger one raises ``errors.PayloadTooLarge`` (a
    ``ValueError``) naming the size and the limit, before anything is sent.
    ``tls_ca`` / ``tls_cert`` / ``tls_key`` / ``tls_verify``: TLS for a ``valkeys://`` URL
    (the CA that signed the server's certificate, this client's certificate and key for
    mutual TLS, ``"full"``/``"ca"``/``"none"`` verification), over the URL's query
    parameters of the same names and ``ECHOMQ_TLS_*`` (``echomq.connectors.tls``); every
    connection of the app and of its workers uses them.
    ``recurrence_clock``: ``"host"`` (the default, as the specification prices the
    registry: keep Pump hosts on NTP) or ``"server"``: a worker's Pump plans and upserts
    the recurrences on the server's ``TIME`` (cron's calendar math stays on the host, in
    the zone), so a Pump host whose clock is off fires on the server's time.
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
    ) -> None:
        keyspace.validate_queue(default_queue)
        url = urls.given(url)  # App("") (an empty $ECHOMQ_URL passed on) is no URL
        given = {"tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key,
                 "tls_verify": tls_verify}
        #: the TLS keyword arguments every connector of this app is made with
        self.tls: dict[str, Any] = {k: os.fspath(v) for k, v in given.items() if v is not None}
        if url is not None:  # a bad setting is refused here, before any I/O
            tls_options(urls.parse(url), dict(self.tls))
        if recurrence_clock not in ("host", "server"):
            raise ConfigError(f"recurrence_clock must be 'host' or 'server', "
                              f"not {recurrence_clock!r}")
        #: the clock a worker's Pump plans the recurrences on (and upserts them from):
        #: ``"host"`` (the specification's registry clock) or ``"server"`` (the server's
        #: ``TIME``, read once per sweep: a host clock that is off no longer shifts them)
        self.recurrence_clock = recurrence_clock
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
        #: the wire asked for (None: let the first connect pick, see ``wire``)
        self.wire_asked = None if wire is None else check_wire(wire)
        self._wire: int | None = self.wire_asked
        self.wire_reason: str | None = None if wire is None else f"wire={wire} asked for"
        self.data_dir = pathlib.Path(data_dir) if data_dir is not None else None
        self.ephemeral = ephemeral
        self.default_queue = default_queue
        self.retention = resolve_retention(retention, keep_completed, keep_completed_for)
        self.on_event = on_event  # the workers' observer (runtime.events) unless they get one
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.recurrences: list[Recurrence] = []
        self.server: Any = None  # the ephemeral EmbeddedServer this app started, if any
        self.server_record: Any = None  # the data dir's record of the implicit server used
        self._conn: Connector | None = None
        self._stop_server: Callable[[], None] | None = None
        self._aconns: dict[int, tuple[asyncio.AbstractEventLoop, AsyncConnector]] = {}
        self._aconnecting: dict[int, tuple[asyncio.AbstractEventLoop,
                                           asyncio.Task[AsyncConnector]]] = {}

    def admit(self, conn: Any, verb: VerbFn[..., T], queue: str, *args: Any,
              **kwargs: Any) -> Any:
        """Run the admission ``verb`` on ``conn`` for ``queue`` under this app's ``wait``,
        if any (the result on a sync connector, an awaitable on an async one), then register
        ``queue`` (``registered``): a refused admission writes nothing, the registry
        included. A ``NotDurable`` admission was applied on the primary: it registers too."""
        if conn.is_async:
            return self._aadmit(conn, verb, queue, *args, **kwargs)
        try:
            if self.wait is None:
                got = verb(conn, queue, *args, **kwargs)
            else:
                got = confirmed(conn, verb.steps(queue, *args, **kwargs), self.wait)
        except NotDurable:
            self.registered(conn, queue)
            raise
        self.registered(conn, queue)
        return got

    async def _aadmit(self, conn: Any, verb: VerbFn[..., T], queue: str, *args: Any,
                      **kwargs: Any) -> Any:
        try:
            if self.wait is None:
                got = await verb(conn, queue, *args, **kwargs)
            else:
                got = await confirmed(conn, verb.steps(queue, *args, **kwargs), self.wait)
        except NotDurable:
            await self.aregistered(conn, queue)
            raise
        await self.aregistered(conn, queue)
        return got

    @staticmethod
    def registered(conn: Connector, queue: str) -> None:
        """Add ``queue`` to the queue registry once per connector (``registry.note``): what
        an admission that succeeded does, never one that was refused."""
        registry.note(conn, queue)

    @staticmethod
    async def aregistered(conn: AsyncConnector, queue: str) -> None:
        """``registered``, awaited (nothing to await once ``queue`` is noted on ``conn``)."""
        if not registry.noted(conn, queue):
            await registry.anote(conn, queue)

    # -- the server ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server URL, starting or finding the embedded server on first use."""
        if self._url is None:
            external = urls.given(os.environ.get("ECHOMQ_URL"))
            if external and self.durability is not None:
                log.warning("durability=%r applies to the embedded server only; the server "
                            "at $ECHOMQ_URL keeps its own appendfsync", self.durability)
            self._url = external or self._embedded()
        return str(self._url)

    @url.setter
    def url(self, value: str | None) -> None:
        self._url = urls.given(value)
        if self.wire_asked is None:  # another server: the first connect there picks again
            self._wire = self.wire_reason = None

    def _embedded(self) -> str:
        from echomq.embedded.server import EmbeddedServer

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

    @property
    def wire(self) -> int:
        """The wire this app's connectors speak: the one asked for, or (``wire=None``) the
        one the first connect picked: 6 when every node has the EMQ module, else 4
        (connecting now if none was made yet)."""
        if self._wire is None:
            self.connector()
        assert self._wire is not None
        return self._wire

    def _connect_wire(self) -> int | str:
        """What to connect with: the wire asked for or picked before, else ``AUTO``."""
        return self._wire if self._wire is not None else AUTO

    def _picked(self, conn: Connector | AsyncConnector) -> None:
        if self._wire is None:
            self._wire, self.wire_reason = conn.wire, conn.wire_reason

    def connector(self, queue: str | None = None) -> Connector:
        """The app's sync connector (made on first use). A ``queue`` named is only checked:
        the queue registry is written by an admission that succeeded (``admit``,
        ``registered``), never before, so a refused one writes nothing."""
        if queue is not None:
            keyspace.validate_queue(queue)
        if self._conn is None:
            self._conn = Connector.connect(self.url, wire=self._connect_wire(),
                                           max_payload_bytes=self.max_payload_bytes, **self.tls)
            self._picked(self._conn)
        return self._conn

    async def aconnector(self, queue: str | None = None) -> AsyncConnector:
        """The app's async connector for the running event loop (made on first use);
        ``queue`` as in ``connector``."""
        if queue is not None:
            keyspace.validate_queue(queue)
        conn = self._loop_conn()
        if conn is None:
            conn = (await self._aconnect(asyncio.get_running_loop()))[1]
        return conn

    def aconnector_ready(self, queue: str) -> AsyncConnector | None:
        """The running loop's connector when it is made and ``queue`` is already registered
        through it, else ``None``: the per-call enqueue path skips a coroutine and the
        registry's await."""
        conn = self._loop_conn()
        return conn if conn is not None and registry.noted(conn, queue) else None

    def _loop_conn(self) -> AsyncConnector | None:
        """The running loop's connector if it was made (an id reused by a later loop is
        not that loop's)."""
        loop = asyncio.get_running_loop()
        held = self._aconns.get(id(loop))
        return held[1] if held is not None and held[0] is loop else None

    async def _aconnect(self, loop: asyncio.AbstractEventLoop
                        ) -> tuple[asyncio.AbstractEventLoop, AsyncConnector]:
        # One connect per loop however many callers ask at once: a web app's first burst
        # of requests would otherwise open a connector each and leak all but the last.
        making = self._aconnecting.get(id(loop))
        if making is None or making[0] is not loop:
            making = (loop, loop.create_task(AsyncConnector.connect(
                self.url, wire=self._connect_wire(), max_payload_bytes=self.max_payload_bytes,
                **self.tls)))
            self._aconnecting[id(loop)] = making
        try:
            conn = await asyncio.shield(making[1])
            self._picked(conn)
        finally:  # done (made or failed): the next caller without a connector starts anew
            if making[1].done() and self._aconnecting.get(id(loop)) is making:
                del self._aconnecting[id(loop)]
        held = self._aconns.get(id(loop))
        if held is None or held[0] is not loop:
            held = (loop, conn)
            self._aconns[id(loop)] = held
        return held

    def close(self) -> None:
        """Close the sync connector and stop the embedded server this app started."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._aconns.clear()
        self._aconnecting.clear()
        stop = self._stop_server
        if stop is not None:
            atexit.unregister(stop)
            stop()
            self._stop_server = None
            self.server = None

    async def aclose(self) -> None:
        """Close this event loop's async connector (``close`` closes the rest)."""
        held = self._aconns.pop(id(asyncio.get_running_loop()), None)
        if held is not None:
            await held[1].close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def served(self, queues: Iterable[str]) -> dict[str, list[str]]:
        """What a worker serving ``queues`` consumes: each name (a partitioned queue of this
        app by its logical name, ``mail``) with the queues it stands for (``mail#0`` ...;
        any other name stands for itself), in order, each queue once."""
        split = {t.queue: t.queues for t in self.tasks.values()}
        out: dict[str, list[str]] = {}
        seen: set[str] = set()
        for q in queues:
            parts = [p for p in split.get(q, [q]) if p not in seen]
            if parts:
                out.setdefault(q, []).extend(parts)
                seen.update(parts)
        return out

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
                raise UnknownTask(name, f"unknown task {name!r}: this app has no task of "
                                        f"that name (its tasks: {known})")
            # a flow node keeps its result for its parent; a fed parent gets its children's
            run = task.route(args, kwargs, tracing.carrier_of(job.payload))
            return canvas.adapt(run, job.payload, task, args, kwargs)

        return route

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

    def _lookup(self, queue: str | None) -> list[str]:
        return [keyspace.validate_queue(queue)] if queue else (
            self.queues() or [self.default_queue])

    def job(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """A job's status (state, attempts, last error, run-at, progress, kept result),
        looked up on ``queue`` or on every queue of this app; ``None`` when neither a row
        nor a kept result exists (never enqueued, or deleted after completion under the
        default retention and no result kept)."""
        guard.string("job_id", job_id)
        return status.read(self.connector(), self._lookup(queue), job_id)

    async def ajob(self, job_id: str, queue: str | None = None) -> JobInfo | None:
        """``job``, awaited."""
        guard.string("job_id", job_id)
        return await status.read(await self.aconnector(), self._lookup(queue), job_id)

    # -- results and cancel --------------------------------------------------------------

    def result(self, job_id: str, timeout: float | dt.timedelta | None = None, *,
               queue: str | None = None) -> Any:
        """Wait for the job to end and return its kept value (``None`` when its task keeps
        none). Blocks on the job's end token (no tight polling; see ``echomq.verbs.results``).
        Raises ``errors.JobFailed`` if it died, ``errors.JobCancelled`` if it was
        cancelled, ``TimeoutError`` after ``timeout`` seconds (``None``: wait for ever),
        ``errors.JobNotFound`` if no queue of this app knows it."""
        guard.string("job_id", job_id)
        return results.wait(self.connector(), self._lookup(queue), job_id,
                            results.timeout_s(timeout))

    async def aresult(self, job_id: str, timeout: float | dt.timedelta | None = None, *,
                      queue: str | None = None) -> Any:
        """``result``, awaited."""
        guard.string("job_id", job_id)
        return await results.wait(await self.aconnector(), self._lookup(queue), job_id,
                                  results.timeout_s(timeout))

    def cancel(self, job_id: str, *, queue: str | None = None) -> Outcome:
        """Cancel a job: ``"cancelled"`` (it was waiting: removed), ``"requested"`` (it is
        running: its holder stops it at its next lease checkpoint and it ends
        ``cancelled``) or ``"absent"`` (unknown, finished or dead). Tries ``queue`` or
        each of this app's queues until one knows the id. A flow parent still waiting for
        its children is cancelled with its waiting subtree (``flows.cancel``)."""
        guard.string("job_id", job_id)
        conn = self.connector()
        for q in self._lookup(queue):
            outcome = flows.cancel(conn, q, job_id)  # a flow parent: its waiting subtree too
            if outcome != Outcome.ABSENT:
                return outcome
        return Outcome.ABSENT

    async def acancel(self, job_id: str, *, queue: str | None = None) -> Outcome:
        """``cancel``, awaited."""
        guard.string("job_id", job_id)
        conn = await self.aconnector()
        for q in self._lookup(queue):
            outcome = await flows.cancel(conn, q, job_id)
            if outcome != Outcome.ABSENT:
                return outcome
        return Outcome.ABSENT
