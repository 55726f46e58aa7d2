"""``Client``: an app's side of the server: where it is, its connectors, and admission.

``App`` is a ``Client`` with a task registry. The client finds or starts the server
(``url``), makes one sync ``Connector`` and one ``AsyncConnector`` per event loop, picks
the wire at the first connect, and is the ``Producer`` a task submits its admission plans
to (``submit``/``asubmit``, ``echomq.tasks.producer``): the same steps driven on either
connector, under the durability wait, the queues registered once admitted. A plan that
fails ambiguously (a lost reply, a failover) is driven again with the same ids for up to
``retry_for`` (``echomq.tasks.retrying``); every connection's commands are bounded by
``timeout`` seconds on the socket (``socket_timeout``, and ``socket_connect_timeout``).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Self, TypeVar

from echomq.connectors import urls
from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.connector import Connector
from echomq.connectors.plan import AUTO
from echomq.core import keyspace
from echomq.core.errors import NotDurable
from echomq.core.steps import Maybe, Pause, Verb, drive
from echomq.tasks.admission import Plan
from echomq.tasks.settings import AppSettings
from echomq.verbs import registry as queue_registry
from echomq.verbs.durability import Wait, confirmed

log = logging.getLogger("echomq.app")

T = TypeVar("T")


class Client:
    """The server side of an ``App``: its keywords of these names.

    ``url``: a server URL; ``None`` reads ``$ECHOMQ_URL`` and, failing that, starts (or
    finds) the embedded server under ``data_dir`` (persistent unless ``ephemeral``). An
    empty URL (``App("")``, ``ECHOMQ_URL=``) is no URL, here and in every command. That
    server is detached: it keeps running after this process exits (``echomq server stop``
    ends it); ``ephemeral=True`` starts a throwaway one that ``close()`` (or exit) stops.
    ``durability``: ``"everysec"`` (default) or ``"always"`` (fsync before every reply),
    for the embedded server only; an external server's fsync policy is its own config.
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
    ``timeout``: seconds one command (and one connect) may take on the socket, 5 by
    default, for the app and its workers (a URL's ``?socket_timeout=`` wins); every
    blocking wait is sized from it, so any value works. ``None``: no limit.
    ``retry_for`` (seconds or a ``timedelta``, 10 s by default; ``None`` or 0: off): an
    admission that failed ambiguously (a reset, a socket timeout, a failover's
    ``READONLY``/``MOVED``/``TRYAGAIN``) is sent again with the ids it minted until it is
    known admitted (a duplicate means an earlier try landed), for up to that long after its
    first failure (``echomq.tasks.retrying``); then the last error reaches the caller.
    """

    def __init__(self, settings: AppSettings) -> None:
        #: the keywords this app was made with, checked (``echomq.tasks.settings``)
        self.settings = settings
        #: the TLS keyword arguments every connector of this app is made with
        self.tls: dict[str, Any] = dict(settings.tls)
        #: seconds one command (and one connect) may take on the socket; a URL's
        #: ``?socket_timeout=`` wins over it
        self.timeout = settings.timeout
        #: how long an ambiguous admission is retried with its ids (``tasks.retrying``)
        self.retry = settings.retry
        self.durability = settings.durability
        self.max_payload_bytes = settings.max_payload_bytes
        #: what every admission waits for (``WAIT``/``WAITAOF``), if anything
        self.wait = settings.wait
        self._url = settings.url
        #: the wire asked for (None: let the first connect pick, see ``wire``)
        self.wire_asked = settings.wire
        self._wire: int | None = self.wire_asked
        self.wire_reason: str | None = (None if settings.wire is None
                                        else f"wire={settings.wire} asked for")
        self.data_dir = settings.data_dir
        self.ephemeral = settings.ephemeral
        self.server: Any = None  # the ephemeral EmbeddedServer this app started, if any
        self.server_record: Any = None  # the data dir's record of the implicit server used
        self._conn: Connector | None = None
        self._stop_server: Callable[[], None] | None = None
        self._aconns: dict[int, tuple[asyncio.AbstractEventLoop, AsyncConnector]] = {}
        self._aconnecting: dict[int, tuple[asyncio.AbstractEventLoop,
                                           asyncio.Task[AsyncConnector]]] = {}

    # -- admission: the Producer a task submits its plans to -----------------------------

    def submit(self, plan: Plan[T]) -> T:
        """Drive ``plan`` on the sync connector (``admitting``): the plan's answer (a job
        id)."""
        conn = self.connector()
        got: Maybe[T] = drive(conn, self.admitting(conn, plan))
        return got  # type: ignore[return-value]  # the result itself on a sync connector

    def asubmit(self, plan: Plan[T]) -> Awaitable[T]:
        """``submit`` on the running loop's connector, awaited. Once that connector is
        made, no coroutine of its own: the per-call path."""
        conn = self._loop_conn()
        if conn is not None:
            got: Maybe[T] = drive(conn, self.admitting(conn, plan))
            return got  # type: ignore[return-value]  # an awaitable on an async connector
        return self._asubmit(plan)

    async def _asubmit(self, plan: Plan[T]) -> T:
        conn = await self.aconnector()
        got: Maybe[T] = drive(conn, self.admitting(conn, plan))
        return await got  # type: ignore[misc,no-any-return]  # an awaitable on async

    def admitting(self, conn: Connector | AsyncConnector, plan: Plan[T]) -> Verb[T]:
        """The steps of admitting ``plan`` on ``conn``, either connector: its steps under
        this app's ``wait`` (if the plan is durable), then its queues registered, so a
        refused admission writes nothing, the registry included (a ``NotDurable`` one was
        applied on the primary and registers too); the plan's answer. An ambiguous failure
        (``tasks.retrying``: a lost connection ``drive`` throws in, a failover's refusal)
        is tried again with the same ids after a ``Pause``, for up to ``retry_for`` after
        the first (HOST monotonic clock)."""
        wait = None if self.wait is None or not plan.durable else self._wait_on(conn)
        steps, tries, since = plan.steps, 0, 0.0
        while True:
            try:
                late: NotDurable | None = None
                try:
                    got = yield from (steps if wait is None else confirmed.steps(steps, wait))
                except NotDurable as exc:  # applied on the primary: it registers too
                    got, late = None, exc
                for q in plan.queues:  # once per connector: nothing once noted
                    if not queue_registry.noted(conn, q):
                        yield from queue_registry.noting(conn, q)
                if late is not None:
                    raise late
                return plan.answer(got)
            except Exception as exc:
                if plan.again is None:
                    raise
                if not tries:
                    since = time.monotonic()
                tries += 1
                pause = self.retry.pause(exc, tries, since)
                if pause is None:
                    raise
            yield Pause(pause)
            steps = plan.again()

    def _wait_on(self, conn: Connector | AsyncConnector) -> Wait | None:
        """This app's ``wait``, its ``WAIT`` cut to what one blocking call may last on
        ``conn`` (``block_for``): a wait the socket timeout would cut is an outage."""
        wait = self.wait
        if wait is None:
            return None
        ms = max(1, int(conn.block_for(wait.timeout_ms / 1000) * 1000))
        return wait if ms >= wait.timeout_ms else replace(wait, timeout_ms=ms)

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

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments every connection of this app (and of its workers) is made
        with: TLS, and the socket timeouts from ``timeout``."""
        return {**self.tls, "socket_timeout": self.timeout,
                "socket_connect_timeout": self.timeout}

    def connector(self, queue: str | None = None) -> Connector:
        """The app's sync connector (made on first use). A ``queue`` named is only checked:
        the queue registry is written by an admission that succeeded (``admit``,
        ``registered``), never before, so a refused one writes nothing."""
        if queue is not None:
            keyspace.validate_queue(queue)
        if self._conn is None:
            self._conn = Connector.connect(self.url, wire=self._connect_wire(),
                                           max_payload_bytes=self.max_payload_bytes,
                                           **self.connect_options())
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
        return conn if conn is not None and queue_registry.noted(conn, queue) else None

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
                **self.connect_options())))
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
