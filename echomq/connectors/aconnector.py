"""The asyncio connector: the sync ``Connector``'s verbs, awaited (see ``connectors.connector``).

Its script steps are auto-pipelined on a single server (``echomq.connectors.autopipeline``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, ClassVar, Literal

import valkey.asyncio as avalkey
import valkey.asyncio.cluster as avcluster
from valkey import exceptions as vexc

from echomq.connectors import packing, urls
from echomq.connectors.autopipeline import AutoPipeline
from echomq.connectors.plan import (
    AUTO,
    MAX_PAYLOAD_BYTES,
    Base,
    Plan,
    check_payload_limit,
    check_wire_choice,
    startup,
    tls_options,
)
from echomq.connectors.replies import (
    CLIENT_FAULTS,
    WIRE_FAULTS,
    mapped,
    wire_error,
)
from echomq.connectors.steady import SteadyCluster
from echomq.core.steps import Arg, Command, Eval, Step, run_async


class AsyncConnector(Base):
    """An asyncio connector over ``valkey.asyncio.Valkey``; the same verbs, awaited.

    Auto-pipelining (``auto_pipeline=True``, the default on a single server): a script
    step (``Eval``: every admission, claim, ack ...) issued while the connector is idle is
    sent at once, as without auto-pipelining; the ones coroutines issue while a call is in
    flight go out together as one pipeline, and each caller awaits its own reply or
    error, exactly as if it had been sent alone (a refusal lands on its own caller; a
    ``NOSCRIPT`` loads the script and re-sends the steps that hit it). A script never
    blocks, so one slow call cannot hold the others; plain commands (``BLPOP``, ``WAIT``)
    and ``Batch`` steps are sent as before. A cluster connector does not auto-pipeline
    (the steps of one iteration may belong to different nodes)."""

    is_async: ClassVar[Literal[True]] = True

    def __init__(self, client: Any, wire: int = 4, *, cluster: bool = False,
                 max_payload_bytes: int = MAX_PAYLOAD_BYTES,
                 auto_pipeline: bool = True) -> None:
        super().__init__(client, wire, cluster=cluster, max_payload_bytes=max_payload_bytes)
        self.auto_pipeline = auto_pipeline and not cluster
        self._pipeline = AutoPipeline(self)

    @classmethod
    async def connect(
        cls, url: str, wire: int | str = 4, *, cluster: bool = False,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES, auto_pipeline: bool = True,
        **options: Any
    ) -> AsyncConnector:
        """Connect to ``url``; see ``Connector.connect``. ``auto_pipeline`` as in the
        class docstring (ignored on a cluster)."""
        check_wire_choice(wire)
        check_payload_limit(max_payload_bytes)
        target = urls.parse(url)
        options.update(tls_options(target, options))
        cluster = cluster or target.cluster
        client: Any
        if cluster:
            # a failing primary costs its own shard only (connectors.steady)
            client = SteadyCluster.from_url(
                target.url, **startup(target, avcluster.ClusterNode), **options)
            packing.use_c_packer_cluster(client)  # before initialize() opens a connection
        else:
            client = avalkey.Valkey.from_url(target.url, **options)
            packing.use_c_packer(client.connection_pool)  # before the first connection
        conn = cls(client, wire=4 if wire == AUTO else int(wire), cluster=cluster,
                   max_payload_bytes=max_payload_bytes, auto_pipeline=auto_pipeline)
        try:
            if cluster:
                try:
                    await client.initialize()
                except (*WIRE_FAULTS, vexc.ValkeyClusterException) as exc:
                    raise wire_error(exc) from exc
            await conn.ping()
            if wire == AUTO:
                conn.wire, conn.wire_reason = await conn._run(conn._choose_plan())
            elif wire == 6:
                await conn.require_native()
        except BaseException:
            await client.aclose()
            raise
        return conn

    def _run(self, plan: Plan) -> Awaitable[Any]:
        return run_async(self._issue, plan, vexc.ResponseError, CLIENT_FAULTS, mapped)

    async def execute(self, step: Step) -> Any:
        """Perform one step and return its raw reply (errors mapped)."""
        if isinstance(step, Eval) and step.via is not None:
            reply = step.via.eval(self, step.script, step.keys, step.args)
            return await reply if hasattr(reply, "__await__") else reply
        if type(step) is Eval and not self.cluster:
            if self.auto_pipeline:
                return await self._pipeline.call(step)
            return await self._eval(step)
        return await self._run(self._plan(step))

    async def _eval(self, step: Eval) -> Any:
        """``_plan`` for one script step on a single server, unrolled (see
        ``Connector._eval``): the per-call path, without a plan generator."""
        args = self._command(step)
        execute = self.client.execute_command
        try:
            try:
                return await execute(*args)
            except vexc.NoScriptError:
                load = self._load(step.script)
                await execute(*load.args)
                return await execute(*args)
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # LOADING: a reply
            raise self._refusal(step, exc) from None
        except WIRE_FAULTS as exc:
            raise wire_error(exc) from exc

    async def ping(self) -> None:
        """One ``PING`` round trip; raises ``errors.WireError`` when the server is gone."""
        await self._run(self._plan(Command(("PING",))))

    async def require_native(self) -> None:
        """Raise ``NativeUnavailable`` unless the server has the EMQ module loaded."""
        missing = self._native_missing(await self._run(self._modules_plan()))
        if missing:
            raise missing

    async def call(self, *args: Arg) -> Any:
        """Send one plain command and return its reply (errors mapped)."""
        return await self.execute(Command(args))

    async def eval(self, script: str, keys: Iterable[str], args: Iterable[Arg]) -> Any:
        """Run a named script EVALSHA-first (the default ``via`` dispatcher)."""
        return await self.execute(Eval(script, tuple(keys), tuple(args)))

    async def close(self) -> None:
        """Close the client and its connections."""
        await self.client.aclose()

    async def __aenter__(self) -> AsyncConnector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
