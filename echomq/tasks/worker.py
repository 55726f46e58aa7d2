"""The worker process: consumers for an app's queues, a Metronome, and a Pump when the app
has recurring registrations. Flow completions are carried by the beat's legs (the
Metronome's, or each lone consumer's): a worker with ``pump=False`` releases them too.

``run_worker(app, queues=..., concurrency=...)`` runs until SIGTERM or SIGINT. On the
first signal it stops claiming and lets the jobs in flight finish within ``grace_s``
(default 30 s); a second signal, or the end of the grace, abandons what is left: those
jobs keep their leases until they lapse, then the reaper returns them to pending. Nothing
is lost; a job may run again (at least once).

Pool mode: the worker's consumers skip their own recovery and promote legs and one
Metronome per worker runs them, elected across worker processes by a SERVER-side lease, so
a fleet reaps and promotes each queue once per beat.

Presence: a worker registers in the live worker registry before it claims (``verbs.workers``:
its id, host, pid, app, queues, concurrency, the tasks its app declares per queue),
heartbeats every ``heartbeat_ms`` (default 5 s) with the jobs it runs now, and leaves on a
clean exit; killed, it drops out within two heartbeats. It records its app's task
declarations per queue (``verbs.declarations``). An operator's ``echomq workers quiet``
stops its claims (running jobs finish; it stays up, idle, until stopped) and ``echomq
workers stop`` stops it as SIGTERM does. A job whose task its app does not declare, while
another live worker's app declares that task on the queue (two apps sharing a queue name),
goes back to the queue without spending an attempt, and one WARNING names both apps.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

from echomq.connectors import urls
from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.plan import AUTO, check_wire
from echomq.core import guards as guard
from echomq.core import keyspace, words
from echomq.core.times import seconds_to_ms
from echomq.runtime.beat import DEFAULT_BEAT_MS, Legs
from echomq.runtime.consumer import DEFAULT_CONCURRENCY, Consumer
from echomq.runtime.events import Event
from echomq.runtime.handler import Job
from echomq.runtime.metronome import Metronome
from echomq.runtime.presence import Presence
from echomq.runtime.waker import pool
from echomq.runtime.weather import Weather
from echomq.tasks import catalog, chunks, lifecycle, ratecaps, tenants
from echomq.tasks.joblog import JobLog
from echomq.tasks.recurring import start_pump
from echomq.verbs import backlog, declarations, groups, registry, workers

if TYPE_CHECKING:
    from echomq.tasks.app import App

log = logging.getLogger("echomq.worker")

DEFAULT_GRACE_S = 30.0


class Worker:
    """Runs ``app``'s tasks on ``queues`` (default: every queue the app's tasks use).

    ``concurrency`` is per queue: a partitioned queue named by its logical name (``mail``)
    is one consumer with one pool of ``concurrency`` slots for all its partitions.
    ``metronome=False`` makes each consumer run its own
    recovery and promote legs (a lone consumer's beat) instead of pool mode. ``burst=True``
    stops on its own once nothing is running and nothing is ready on its queues (the
    drain then runs as after a signal). ``log_jobs`` logs one INFO line per finished job.
    ``timeout`` (seconds or ``timedelta``) is the handler timeout for tasks declared
    without one (off unless set). ``on_event`` defaults to the app's observer.
    ``presence=False`` keeps the worker out of the live worker registry (no heartbeat, no
    quiet/stop requests, no hand-back of another app's tasks); ``heartbeat_ms`` is its
    heartbeat period (a killed worker drops out within two); ``name`` names its app there
    (``echomq worker`` passes its ``module:attribute``).
    ``task_metrics`` (on by default) counts each task's runs by outcome and run time on the
    server (``verbs.taskmetrics``: the dashboard's Tasks page and ``/metrics``).
    ``wire`` (4 or 6) defaults to the app's: the one it was given, else 6 when every node
    has the EMQ module and 4 otherwise; the start line says which and why.
    """

    def __init__(
        self,
        app: App,
        queues: Sequence[str] | None = None,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        beat_ms: int = DEFAULT_BEAT_MS,
        grace_s: float = DEFAULT_GRACE_S,
        metronome: bool = True,
        pump: bool = True,
        on_event: Callable[[Event], None] | None = None,
        burst: bool = False,
        log_jobs: bool = True,
        timeout: float | dt.timedelta | None = None,
        presence: bool = True,
        heartbeat_ms: int = workers.DEFAULT_HEARTBEAT_MS,
        name: str | None = None,
        task_metrics: bool = True,
        wire: int | None = None,
    ) -> None:
        self.app = app
        self.wire_asked = check_wire(wire) if wire is not None else app.wire_asked
        # a partitioned queue named by its logical name is one consumer for its partitions
        names = queues or list(dict.fromkeys(
            t.queue for t in app.tasks.values())) or [app.default_queue]
        self.served = app.served(names)
        self.queues = [q for parts in self.served.values() for q in parts]
        for q in self.queues:
            keyspace.validate_queue(q)
        self.concurrency = guard.positive("concurrency", concurrency)
        self.beat_ms = guard.span("beat_ms", beat_ms, minimum=1)
        if grace_s < 0:
            raise ValueError("grace_s must be >= 0")
        self.grace_s = grace_s
        self.use_metronome = metronome
        self.use_pump = pump
        on_event = on_event if on_event is not None else app.on_event
        self.on_event = on_event
        self.timeout_ms = seconds_to_ms("timeout", timeout)
        self.burst = burst
        self.task_metrics = task_metrics
        # one INFO line per finished job, as rq and arq print (the user's observer still runs)
        self.log_jobs = log_jobs
        self.consumers: list[Consumer] = []
        self.metronome: Metronome | None = None
        self.pump: Any = None
        self.unfinished = 0
        self.abandoned: list[str] = []  # the ids the drain left to the reaper
        self.force = asyncio.Event()
        self.use_presence = presence
        self.heartbeat_ms = guard.span("heartbeat_ms", heartbeat_ms, minimum=1)
        self.name = name or catalog.app_name(app)
        #: this process's id in the live worker registry
        self.id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.presence: Presence | None = None
        #: set by a quiet request: no more claims; running jobs finish; up until stopped
        self.quiet = asyncio.Event()
        self.weather = Weather(f"worker {os.getpid()}")
        self._stop: asyncio.Event | None = None
        self._conn: Any = None
        self._live: tuple[float, list[workers.WorkerRecord]] | None = None
        self._warned: set[tuple[str, str]] = set()

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until ``stop`` is set, then drain; returns how many jobs were left
        unfinished (abandoned to the reaper)."""
        # named connections: CLIENT LIST tells which worker process holds which connection
        conn = await AsyncConnector.connect(self.app.url, wire=self.wire_asked or AUTO,
                                            client_name=f"echomq-worker-{os.getpid()}",
                                            **self.app.connect_options())
        try:
            async with lifecycle.hooks(self.app):  # on_startup before, on_shutdown after
                return await self._serve(conn, stop)
        finally:
            await conn.close()

    async def _serve(self, conn: AsyncConnector, stop: asyncio.Event) -> int:
        retention = self.app.retention
        self._stop = stop
        self._conn = conn
        self.quiet = asyncio.Event()
        # the job lines cost an event per transition: none when INFO would drop them
        observer = (JobLog(self.on_event) if self.log_jobs and log.isEnabledFor(logging.INFO)
                    else self.on_event)
        self.consumers = [
            Consumer(
                conn, name, router=self.app.router(parts[0]),
                concurrency=max(self.concurrency, chunks.widest(self.app, name)),  # a chunk fills
                beat_ms=self.beat_ms, lease_ms=min(self.app.lease_for(p) for p in parts),
                retention=retention, pooled=self.use_metronome, on_event=observer,
                timeout_ms=self.timeout_ms, weather=self.weather,
                on_unknown=self._hand_back if self.use_presence else None,
                task_metrics=self.task_metrics, partitions=parts if len(parts) > 1 else None,
                chunks=chunks.handlers(self.app, name))
            for name, parts in self.served.items()
        ]
        background = asyncio.Event()  # the metronome, pump and presence outlive the drain
        claims_end = asyncio.Event()  # stop, or a quiet request: no more claims
        helpers: list[asyncio.Task[Any]] = []
        runs: list[asyncio.Task[None]] = []
        watch = asyncio.ensure_future(self._watch(stop, claims_end))
        try:
            # inside the try: a start that fails (a refused registration, a lost server)
            # stops what already runs instead of leaving it to die with the connection
            await registry.add(conn, self.queues)  # listed by the CLI even while empty
            await ratecaps.apply(conn, self.app, self.queues)  # @app.task(rate=...)
            await tenants.apply(conn, self.app, self.queues)  # group_limit=, queue_limit=
            await self._declare(conn)
            await log_groups(conn, self.queues)
            if self.use_presence:
                # registered before the first claim: a peer app's worker that claims one of
                # this app's jobs sees this worker serve it and hands the job back
                self.presence = Presence(
                    conn, self._registration(conn.wire), running=self._running_jobs,
                    on_request=self._requested, publish_ms=min(self.heartbeat_ms,
                                                               max(self.beat_ms, 100)),
                    weather=self.weather)
                await self.presence.join()
                helpers.append(asyncio.ensure_future(self.presence.run(background)))
            if self.use_metronome:
                by_queue = {q: c for c in self.consumers for q in c.queues}
                self.metronome = Metronome(
                    conn, self.queues, beat_ms=self.beat_ms,
                    legs=Legs(retention=retention, carry_lease_ms=3 * self.beat_ms),
                    on_due=lambda q, ms: by_queue[q].note_due(ms) if q in by_queue else None,
                    weather=self.weather, survey=True)
                waker = pool(conn, self.consumers, self.metronome, self.beat_ms)
                if waker is not None:  # one wait for every idle consumer (runtime.waker)
                    helpers.append(asyncio.ensure_future(waker.run(claims_end)))
                helpers.append(asyncio.ensure_future(self.metronome.run(background)))
            recurrences = [r for r in self.app.recurrences if r.queue in self.queues]
            if recurrences and self.use_pump:
                pump = await start_pump(conn, recurrences, background, self.beat_ms,
                                         self.weather,
                                         getattr(self.app, "recurrence_clock", "host"))
                if pump is not None:
                    self.pump, task = pump
                    helpers.append(task)
            log.info("worker %d on %s (wire %d: %s) serving %s (concurrency %d per queue, "
                     "beat %d ms%s%s)%s", os.getpid(), urls.redact(self.app.url), conn.wire,
                     conn.wire_reason,
                     words.few(self.queues), self.concurrency, self.beat_ms,
                     ", metronome" if self.use_metronome else "",
                     ", burst" if self.burst else "",
                     f"; registered as {self.id}" if self.presence else "")
            runs = [asyncio.ensure_future(c.run(claims_end)) for c in self.consumers]
            if self.burst:
                helpers.append(asyncio.ensure_future(self._burst(conn, stop)))
            await asyncio.gather(*runs)
            if not stop.is_set():
                # quiet: what runs finishes in its own tasks; the worker stays up, claiming
                # nothing, until it is stopped
                await stop.wait()
            self.unfinished = await self._drain()
        finally:
            watch.cancel()
            for r in runs:
                r.cancel()
            background.set()
            if helpers:
                await asyncio.wait(helpers, timeout=2.0)
            for h in helpers:
                h.cancel()
            if helpers:
                await asyncio.wait(helpers, timeout=1.0)
            if self.presence is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.presence.leave(), 2.0)
        if self.unfinished:
            log.warning("%d jobs unfinished at exit (%s); the reaper returns them after "
                        "their leases", self.unfinished, ", ".join(self.abandoned))
        else:
            log.info("worker stopped cleanly")
        return self.unfinished

    async def _watch(self, stop: asyncio.Event, claims_end: asyncio.Event) -> None:
        """End the claims at a stop or a quiet request, and publish the state."""
        quiet = asyncio.ensure_future(self.quiet.wait())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({quiet, stopped}, return_when=asyncio.FIRST_COMPLETED)
            claims_end.set()
            if not stop.is_set():
                if self.presence is not None:
                    self.presence.set_state("quiet")
                await stop.wait()
            if self.presence is not None:
                self.presence.set_state("stopping")
        finally:
            quiet.cancel()
            stopped.cancel()

    def _requested(self, action: str) -> None:
        """A quiet or stop request from an operator (``echomq workers quiet|stop``)."""
        if action == "quiet":
            if not self.quiet.is_set() and not (self._stop and self._stop.is_set()):
                running = sum(len(c.inflight) for c in self.consumers)
                log.info("quiet requested: no new claims; %d running jobs finish; the "
                         "worker stays up until it is stopped", running)
                self.quiet.set()
        elif action == "stop":
            if self._stop is not None and not self._stop.is_set():
                log.info("stop requested: no new claims; draining in-flight jobs (grace "
                         "%.1f s)", self.grace_s)
                self._stop.set()
        else:
            log.warning("ignored an unknown control request %r", action)

    def _registration(self, wire: int) -> workers.Registration:
        return workers.Registration(
            id=self.id, host=socket.gethostname(), pid=os.getpid(), app=self.name,
            queues=tuple(self.queues), concurrency=self.concurrency, wire=wire,
            slots=self.concurrency * len(self.served),
            version=_version(), heartbeat_ms=self.heartbeat_ms,
            tasks=catalog.tasks_by_queue(self.app, self.queues))

    async def _declare(self, conn: AsyncConnector) -> None:
        """Record the app's task declarations on each served queue (``emq:{q}:tasks``)."""
        declared = {q: catalog.declared_on(self.app, q) for q in self.queues}
        await declarations.declare_many(conn, {q: d for q, d in declared.items() if d})

    def _running_jobs(self) -> list[Any]:
        return [h for c in self.consumers for h in c.held.values()]

    async def _hand_back(self, job: Job, task: str) -> int | None:
        """A job of ``task``, which this app does not declare: the ms to send it back for
        (a quarter beat: the serving worker claims it that soon) when another live
        worker's app serves ``task`` on its queue, else None (it dies, as a job no app
        serves)."""
        found = await self._owners(job.queue, task)
        if found is None:
            return None
        key = (job.queue, task)
        if key not in self._warned:
            self._warned.add(key)
            log.warning("job %s %s: this worker's app %s does not declare task %r, but app "
                        "%s (worker %s) serves it on queue %r: sent back without spending "
                        "an attempt. Two apps share the queue name %r: give each app its "
                        "own queues", job.id, task, self.name, task, found.app, found.id,
                        job.queue, job.queue)
        else:
            log.debug("job %s %s: sent back for %s", job.id, task, found.app)
        return max(1, self.beat_ms // 4)

    async def _owners(self, queue: str, task: str) -> workers.WorkerRecord | None:
        """A live worker (not this one) whose app declares ``task`` on ``queue``; the
        registry is read at most once a second (HOST monotonic) for these asks."""
        now = time.monotonic()
        if self._live is None or now - self._live[0] > 1.0:
            try:
                self._live = (now, await workers.live(self._conn))
            except Exception as exc:  # a read that fails decides nothing: keep the job
                log.debug("registry read failed (%s); job kept for a later claim", exc)
                return None if self._live is None else _first(
                    workers.owners(self._live[1], queue, task, exclude=self.id))
        return _first(workers.owners(self._live[1], queue, task, exclude=self.id))

    async def _burst(self, conn: AsyncConnector, stop: asyncio.Event) -> None:
        """Burst mode: set ``stop`` once two checks a beat apart (HOST monotonic clock) see
        nothing running, no new claim, and nothing ready on any served queue."""
        quiet = 0
        claimed = -1
        while not stop.is_set():
            await asyncio.sleep(self.beat_ms / 1000)
            now_claimed = sum(c.stats.claimed for c in self.consumers)
            idle = now_claimed == claimed and not any(c.inflight for c in self.consumers)
            claimed = now_claimed
            if idle:
                waiting = sum([await backlog.ready(conn, q) for q in self.queues])
                idle = waiting == 0
            quiet = quiet + 1 if idle else 0
            if quiet >= 2:
                log.info("burst: nothing left to run on %s; stopping", words.few(self.queues))
                stop.set()

    async def _drain(self) -> int:
        """Every queue's in-flight jobs get the whole grace, together: the drain ends when
        the last queue's jobs have settled (an idle queue is done at once, and must not end
        the others' wait), at the end of the grace, or on a forced stop."""
        inflight = sum(len(c.inflight) for c in self.consumers)
        if inflight:
            log.info("stopping: %d jobs in flight, grace %.1f s", inflight, self.grace_s)
        drains = [asyncio.ensure_future(c.drain(self.grace_s)) for c in self.consumers]
        every = asyncio.ensure_future(asyncio.wait(drains))
        forced = asyncio.ensure_future(self.force.wait())
        await asyncio.wait([every, forced], return_when=asyncio.FIRST_COMPLETED)
        forced.cancel()
        if not every.done():
            # a forced stop: drain again with no grace (abandon the rest to the reaper)
            every.cancel()
            for d in drains:
                d.cancel()
            await asyncio.wait(drains)
            drains = [asyncio.ensure_future(c.drain(0)) for c in self.consumers]
            await asyncio.wait(drains)
        self.abandoned = [jid for c in self.consumers for jid in c.abandoned]
        return sum(d.result() for d in drains if not d.cancelled())


async def log_groups(conn: AsyncConnector, queues: Sequence[str]) -> None:
    """One line per queue that has groups: how many, and what waits and runs in them (read
    once at start: a queue with thousands of groups makes this a real read)."""
    for q, n in (await groups.seen(conn, queues)).items():
        stats = await groups.stats(conn, q) if n else None
        if stats:
            log.info("queue %s: %d groups, %d jobs waiting in their lanes, %d active, "
                     "%d paused groups", q, len(stats),
                     sum(s.waiting for s in stats.values()),
                     sum(s.active for s in stats.values()),
                     sum(1 for s in stats.values() if s.paused))


def _first(records: list[workers.WorkerRecord]) -> workers.WorkerRecord | None:
    return records[0] if records else None


def _version() -> str:
    try:
        return metadata.version("echomq")
    except metadata.PackageNotFoundError:  # a source tree, not installed
        return "unknown"


def run_worker(app: App, queues: Sequence[str] | None = None, **options: Any) -> int:
    """Run a ``Worker(app, queues, **options)`` in this process until SIGTERM/SIGINT; the
    count of jobs left unfinished (abandoned to the reaper)."""
    return serve(Worker(app, queues, **options)).unfinished


def serve(worker: Worker) -> Worker:
    """Run ``worker`` in this process until SIGTERM/SIGINT (or, in burst mode, until its
    queues have nothing due); the worker, with ``unfinished`` and ``abandoned`` set."""
    grace_s = worker.grace_s

    async def main() -> None:
        stop = asyncio.Event()
        worker.force = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                log.warning("second %s: abandoning in-flight jobs to the reaper",
                            signal.Signals(signum).name)
                worker.force.set()
            else:
                log.info("%s: no new claims; draining in-flight jobs (grace %.1f s)",
                         signal.Signals(signum).name, grace_s)
                stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await worker.run(stop)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(sig)

    asyncio.run(main())
    return worker
