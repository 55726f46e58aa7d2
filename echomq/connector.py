"""Connectors: the I/O edge. One sync (`Connector`) and one asyncio (`AsyncConnector`).

Both take a step from ``echomq.steps`` and return the raw reply. Scripts are sent
EVALSHA-first: the SHA is computed locally, and only a ``NOSCRIPT`` answer (a fresh
server, a ``SCRIPT FLUSH``, a failover to a replica that never saw ``SCRIPT LOAD``) costs a
``SCRIPT LOAD`` and one retry. ``wire=6`` sends the native module command where a step
names one and the script otherwise; the module must be loaded on the server, which
``connect`` checks with ``MODULE LIST`` so the failure comes at connect, not at the first
verb. ``cluster=True`` speaks to a Valkey Cluster: every step's keys share the queue's hash
tag, so the client routes it whole to the slot's owner.

What to send (and what to do on ``NOSCRIPT``) is decided once, in ``_Plan``: a generator
of client calls. The two connectors only differ in how they perform a call: directly, or
awaited. Errors: connection failures raise ``errors.WireError``; server refusals raise the
``errors.ServerError`` subclass for their text, the text kept exactly.

Sizes: every argument is measured before a byte is sent. One over ``max_payload_bytes``
(default ``MAX_PAYLOAD_BYTES``, 64 MiB), or a command over ``MAX_COMMAND_BYTES`` in all
(512 MiB: the server drops a client whose query buffer passes 1 GiB, and refuses one bulk
string over ``proto-max-bulk-len``, 512 MiB), raises ``errors.PayloadTooLarge`` naming the
size and the limit; without it a 600 MB payload streamed out in full and then failed as a
connection reset.
"""

from __future__ import annotations

import asyncio
import os
import re
import traceback
from collections.abc import Awaitable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import valkey
import valkey.asyncio as avalkey
import valkey.asyncio.cluster as avcluster
import valkey.cluster as vcluster
from valkey import exceptions as vexc

from . import errors, native, scripts, urls
from .steps import Arg, Batch, Command, Eval, Native, Nodes, Step

WIRES = (4, 6)
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
MAX_COMMAND_BYTES = 512 * 1024 * 1024
NATIVE_MODULE = "emq"
# A reply's first word survives valkey-py only when it is not "ERR" (stripped): these are
# the codes the server (and our scripts) send that valkey-py keeps. Anything else was an
# "ERR ..." reply, even when its text opens with an upper-case word ("ERR WAITAOF ...").
_KEPT_CODES = frozenset({
    "WRONGTYPE", "BUSY", "BUSYKEY", "BUSYGROUP", "MISCONF", "MASTERDOWN", "NOREPLICAS",
    "UNKILLABLE", "NOTBUSY", "NOPROTO", "CROSSSLOT", "CLUSTERDOWN", "TRYAGAIN", "MOVED",
    "ASK", "UNBLOCKED", "NOGROUP", "NOQUORUM", "NOGOODSLAVE", "NOTREADY", "INVALIDOBJ",
})
_CODE = re.compile(r"^EMQ[A-Z0-9_]*$")
# a cluster client raises ClusterError / ValkeyClusterException when no node answers for a
# slot (a primary died and no replica has taken over yet): weather, like a lost connection
_WIRE_FAULTS = (vexc.ConnectionError, vexc.TimeoutError, OSError, vexc.ClusterError,
                vexc.ValkeyClusterException)


# valkey-py strips the code of these replies and says it with the exception's class instead
_STRIPPED: tuple[tuple[type[Exception], str], ...] = (
    (vexc.OutOfMemoryError, "OOM"),
    (vexc.ReadOnlyError, "READONLY"),
    (vexc.BusyLoadingError, "LOADING"),
    (vexc.NoScriptError, "NOSCRIPT"),
    (vexc.NoPermissionError, "NOPERM"),
    (vexc.ExecAbortError, "EXECABORT"),
)


def _server_error(exc: Exception) -> errors.ServerError:
    # The contract keeps server texts exact, code included (a producer backs off on OOM),
    # so the code valkey-py stripped goes back: from the exception's class where it has
    # one, else "ERR" for a reply whose first word is not a code (ERR is stripped too).
    text = str(exc)
    if isinstance(exc, vexc.ClusterCrossSlotError) or text.startswith("CROSSSLOT"):
        return _cross_slot(text)
    for cls, code in _STRIPPED:
        if isinstance(exc, cls):
            return errors.from_server(f"{code} {text}")
    first = text.split(" ", 1)[0]
    if first not in _KEPT_CODES and not _CODE.match(first):
        text = "ERR " + text
    return errors.from_server(text)


def _wire_error(exc: BaseException) -> errors.EchoMQError:
    if isinstance(exc, vexc.ValkeyClusterException) and "same key slot" in str(exc):
        # the cluster client refuses a call whose keys span slots before sending it
        return _cross_slot(str(exc))
    return errors.WireError(f"{type(exc).__name__}: {exc}")


def _cross_slot(detail: str) -> errors.CrossSlotError:
    return errors.CrossSlotError(
        f"CROSSSLOT keys of one call span several cluster slots ({detail}); every key of a "
        "queue must carry its hash tag emq:{q}:")


def check_payload_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"max_payload_bytes must be an int >= 1, not {limit!r}")
    if limit > MAX_COMMAND_BYTES:
        raise ValueError(f"max_payload_bytes must be at most {MAX_COMMAND_BYTES:,} "
                         f"(the server's proto-max-bulk-len), not {limit:,}")
    return limit


def _check_wire(wire: int) -> int:
    if wire not in WIRES:
        raise ValueError(f"wire must be 4 (scripts) or 6 (native module), not {wire!r}")
    return wire


def _module_names(reply: Any) -> set[str]:
    names = set()
    for entry in reply or ():
        if isinstance(entry, dict):
            name = entry.get(b"name", entry.get("name"))
        else:  # a flat [k, v, ...] list
            flat = list(entry)
            name = dict(zip(flat[::2], flat[1::2], strict=False)).get(b"name")
        if name is not None:
            names.add(name.decode() if isinstance(name, bytes) else str(name))
    return names


# -- the plan: what to send, written once ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    """One client command (``kwargs`` carries cluster routing, e.g. ``target_nodes``)."""

    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class _Pipe:
    """Commands pipelined in one round trip; the reply list holds exceptions in place."""

    calls: tuple[tuple[Arg, ...], ...]
    #: per call, its cluster routing (``target_nodes``), or () for all routed by keys
    kwargs: tuple[tuple[tuple[str, Any], ...], ...] = ()


_Plan = Generator["_Call | _Pipe", Any, Any]


class _Base:
    """What both connectors share: the plan for each step, and its reply handling."""

    is_async: ClassVar[bool] = False

    def __init__(self, client: Any, wire: int = 4, *, cluster: bool = False,
                 max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.client = client
        self.wire = _check_wire(wire)
        self.cluster = cluster
        self.max_payload_bytes = check_payload_limit(max_payload_bytes)

    def _sized(self, args: tuple[Arg, ...]) -> None:
        """Refuse an argument over ``max_payload_bytes`` (or a command over
        ``MAX_COMMAND_BYTES``) before anything is sent."""
        limit = self.max_payload_bytes
        total = 0
        for a in args:
            if type(a) is int:
                continue
            n = len(a)  # type: ignore[arg-type]
            if n * 4 > limit and isinstance(a, str):  # UTF-8 may take up to 4 bytes a char
                n = len(a.encode())
            if n > limit:
                raise errors.PayloadTooLarge(
                    f"payload is {n:,} bytes, over the limit of {limit:,} bytes "
                    f"(max_payload_bytes; the server's own cap is proto-max-bulk-len); "
                    f"nothing was sent", n, limit)
            total += n
        if total > MAX_COMMAND_BYTES:
            raise errors.PayloadTooLarge(
                f"one command would carry {total:,} bytes, over {MAX_COMMAND_BYTES:,} "
                f"bytes (send fewer jobs per call); nothing was sent", total, MAX_COMMAND_BYTES)

    def _command(self, step: Eval | Command | Native) -> tuple[Arg, ...]:
        args = self._args(step)
        self._sized(args)
        return args

    def _args(self, step: Eval | Command | Native) -> tuple[Arg, ...]:
        if isinstance(step, Command):
            if (self.cluster and step.args and step.args[0] in ("WAIT", "WAITAOF")
                    and step.route is None and step.node is None):
                # keyless: without a route (durability.confirmed gives the written key) a
                # cluster could send it to another node than the write's connection
                raise errors.ConfigError(
                    f"{step.args[0]} on a cluster needs a route: the key whose write it "
                    "waits for (Command(..., route=key); durability.confirmed sets it)")
            return step.args
        if isinstance(step, Native):
            if self.wire != 6:
                raise errors.ConfigError(f"{step.command} is native only: connect with wire=6")
            return (step.command, len(step.keys), *step.keys, *step.args)
        if self.wire == 6 and step.native is not None:
            return (step.native, len(step.keys), *step.keys, *step.args)
        return ("EVALSHA", scripts.sha(step.script), len(step.keys), *step.keys, *step.args)

    def _load(self, name: str) -> _Call:
        # a cluster loads on every primary: the one that owns the slot may change
        kwargs = (("target_nodes", "primaries"),) if self.cluster else ()
        return _Call(("SCRIPT", "LOAD", scripts.source(name)), kwargs)

    def _plan(self, step: Step) -> _Plan:
        if isinstance(step, Batch):
            return (yield from self._plan_batch(step.steps))
        if isinstance(step, Nodes):
            return self._primaries()
        call = _Call(self._command(step), self._target(step))
        try:
            return (yield call)
        except vexc.NoScriptError:
            if not isinstance(step, Eval):  # a plain EVALSHA someone sent: theirs to handle
                raise
            yield self._load(step.script)
            return (yield call)

    def _target(self, step: Eval | Command | Native) -> tuple[tuple[str, Any], ...]:
        """Cluster routing for a keyless command: a named primary, or the primary of a
        key's slot (a WAIT behind a write); () to route by the step's own keys."""
        if not self.cluster or not isinstance(step, Command):
            return ()
        if step.node is not None:
            return (("target_nodes", self._node(step.node)),)
        if step.route is not None:
            return (("target_nodes", self.client.get_node_from_key(step.route)),)
        return ()

    def _pipe(self, steps: Sequence[Eval | Command | Native]) -> _Pipe:
        kwargs = tuple(self._target(s) for s in steps)
        return _Pipe(tuple(self._command(s) for s in steps),
                     kwargs if any(kwargs) else ())

    def _plan_batch(self, steps: Sequence[Eval | Command | Native]) -> _Plan:
        replies = list((yield self._pipe(steps)))
        # a cluster pipeline reports a lost node in place; the batch is then weather as a
        # whole (steps on healthy nodes may have run: at least once, never silently)
        lost = next((r for r in replies if isinstance(r, _WIRE_FAULTS)), None)
        if lost is not None:
            raise lost
        missing = [i for i, (s, r) in enumerate(zip(steps, replies, strict=True))
                   if isinstance(s, Eval) and isinstance(r, vexc.NoScriptError)]
        if missing:
            for name in dict.fromkeys(steps[i].script for i in missing):  # type: ignore[union-attr]
                yield self._load(name)
            # a WAIT / WAITAOF counts the writes sent before it on its connection, so it
            # rides again behind the re-sent ones (durability.confirmed)
            missing = sorted({*missing, *(i for i, s in enumerate(steps) if isinstance(s, Command)
                                          and s.args and s.args[0] in ("WAIT", "WAITAOF"))})
            again = yield self._pipe([steps[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return [_server_error(r) if isinstance(r, (vexc.ResponseError, vexc.BusyLoadingError))
                else r for r in replies]

    def _issue(self, op: _Call | _Pipe) -> Any:
        """Send one op: the reply on a sync client, an awaitable of it on an async one."""
        if isinstance(op, _Pipe):
            pipe = self.client.pipeline(transaction=False)
            for i, args in enumerate(op.calls):
                pipe.execute_command(*args, **dict(op.kwargs[i] if op.kwargs else ()))
            sent = pipe.execute(raise_on_error=False)
        else:
            sent = self.client.execute_command(*op.args, **dict(op.kwargs))
        return _topology_guard(sent) if self.cluster and self.is_async else sent

    def _primaries(self) -> list[str | None]:
        """The names of the cluster's primaries as the client last saw them; ``[None]``
        for a single server."""
        if not self.cluster:
            return [None]
        return [*sorted(str(n.name) for n in self.client.get_primaries())]

    def _node(self, name: str) -> Any:
        node = self.client.get_node(node_name=name)
        if node is None:  # a failover or a reshard since the Nodes step
            raise vexc.ConnectionError(f"cluster node {name} is gone")
        return node

    def _modules_plan(self) -> _Plan:
        if not self.cluster:
            return _module_names((yield _Call(("MODULE", "LIST"))))
        # a cluster asks every node (a failover promotes a replica), by target: the async
        # cluster client cannot route the keyless MODULE LIST by keys; {node: reply} back
        reply = yield _Call(("MODULE", "LIST"), (("target_nodes", "all"),))
        if isinstance(reply, dict) and reply:
            return set.intersection(*(_module_names(r) for r in reply.values()))
        return _module_names(reply)

    @staticmethod
    def _native_missing(names: set[str]) -> errors.NativeUnavailable | None:
        if NATIVE_MODULE in names:
            return None
        reason = native.unavailable_reason()
        fix = (f"and this install has none to load: {reason}" if reason else
               "start the server with --loadmodule echomq.native.module_path(), or use wire=4")
        return errors.NativeUnavailable(
            f"wire=6 needs the {NATIVE_MODULE!r} module loaded on the server "
            f"(MODULE LIST shows {sorted(names) or 'none'}); {fix}"
        )

    def __repr__(self) -> str:
        kind = " cluster" if self.cluster else ""
        return f"<{type(self).__name__} wire={self.wire}{kind} {self.client!r}>"


class Connector(_Base):
    """A synchronous connector over a ``valkey.Valkey`` client (thread safe: it pools)."""

    @classmethod
    def connect(
        cls, url: str, wire: int = 4, *, cluster: bool = False,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES, **options: Any
    ) -> Connector:
        """Connect to ``url`` (``valkey://``, ``valkeys://``, ``redis://``, ``rediss://``,
        ``unix://``; user and password in the URL). ``options`` go to the connection pool.
        ``max_payload_bytes`` bounds one argument (see the module docstring).

        ``cluster=True`` treats ``url`` as one startup node of a Valkey Cluster: the client
        discovers the rest and routes every step to the node owning its keys' slot (one
        queue = one hash tag = one slot)."""
        _check_wire(wire)
        check_payload_limit(max_payload_bytes)
        target = urls.parse(url)
        cluster = cluster or target.cluster
        try:
            if cluster:
                factory: Any = vcluster.ValkeyCluster
                client = factory.from_url(
                    target.url, **_startup(target, vcluster.ClusterNode), **options)
            else:
                client = valkey.Valkey.from_url(target.url, **options)
        except _WIRE_FAULTS as exc:
            raise _wire_error(exc) from exc
        except vexc.ValkeyClusterException as exc:  # no startup node answered
            raise _wire_error(exc) from exc
        conn = cls(client, wire=wire, cluster=cluster, max_payload_bytes=max_payload_bytes)
        try:
            conn.ping()
            if wire == 6:
                conn.require_native()
        except BaseException:
            client.close()
            raise
        return conn

    def _run(self, plan: _Plan) -> Any:
        try:
            op = next(plan)
            while True:
                try:
                    reply = self._issue(op)
                except vexc.ResponseError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # LOADING: a reply
            raise _server_error(exc) from None
        except _WIRE_FAULTS as exc:
            raise _wire_error(exc) from exc

    def execute(self, step: Step) -> Any:
        """Perform one step and return its raw reply (errors mapped)."""
        if type(step) is Eval:
            if step.via is not None:
                return step.via.eval(self, step.script, step.keys, step.args)
            return self._eval(step)
        return self._run(self._plan(step))

    def _eval(self, step: Eval) -> Any:
        """``_plan`` for one script step, unrolled: the per-job path (every enqueue) runs
        here, without a plan generator to start and step through."""
        args = self._command(step)
        execute = self.client.execute_command
        try:
            try:
                return execute(*args)
            except vexc.NoScriptError:
                load = self._load(step.script)
                execute(*load.args, **dict(load.kwargs))
                return execute(*args)
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # LOADING: a reply
            raise _server_error(exc) from None
        except _WIRE_FAULTS as exc:
            raise _wire_error(exc) from exc

    def ping(self) -> None:
        self._run(self._plan(Command(("PING",))))

    def require_native(self) -> None:
        """Raise ``NativeUnavailable`` unless the server has the EMQ module loaded."""
        missing = self._native_missing(self._run(self._modules_plan()))
        if missing:
            raise missing

    def call(self, *args: Arg) -> Any:
        """Send one plain command and return its reply (errors mapped)."""
        return self.execute(Command(args))

    def eval(self, script: str, keys: Iterable[str], args: Iterable[Arg]) -> Any:
        """Run a named script EVALSHA-first (the default ``via`` dispatcher)."""
        return self.execute(Eval(script, tuple(keys), tuple(args)))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnector(_Base):
    """An asyncio connector over ``valkey.asyncio.Valkey``; the same verbs, awaited.

    Auto-pipelining (``auto_pipeline=True``, the default on a single server): the script
    steps (``Eval``: every admission, claim, ack ...) that coroutines issue in one loop
    iteration go out together as one pipeline, and each caller awaits its own reply or
    error, exactly as if it had been sent alone (a refusal lands on its own caller; a
    ``NOSCRIPT`` loads the script and re-sends the steps that hit it). A script never
    blocks, so one slow call cannot hold the others; plain commands (``BLPOP``, ``WAIT``)
    and ``Batch`` steps are sent as before. A cluster connector does not auto-pipeline
    (the steps of one iteration may belong to different nodes)."""

    is_async: ClassVar[bool] = True

    def __init__(self, client: Any, wire: int = 4, *, cluster: bool = False,
                 max_payload_bytes: int = MAX_PAYLOAD_BYTES,
                 auto_pipeline: bool = True) -> None:
        super().__init__(client, wire, cluster=cluster, max_payload_bytes=max_payload_bytes)
        self.auto_pipeline = auto_pipeline and not cluster
        self._queued: list[tuple[tuple[Arg, ...], Eval, asyncio.Future[Any]]] = []
        self._flushing: set[asyncio.Task[None]] = set()

    @classmethod
    async def connect(
        cls, url: str, wire: int = 4, *, cluster: bool = False,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES, auto_pipeline: bool = True,
        **options: Any
    ) -> AsyncConnector:
        """Connect to ``url``; see ``Connector.connect``. ``auto_pipeline`` as in the
        class docstring (ignored on a cluster)."""
        _check_wire(wire)
        check_payload_limit(max_payload_bytes)
        target = urls.parse(url)
        cluster = cluster or target.cluster
        client: Any
        if cluster:
            client = avcluster.ValkeyCluster.from_url(
                target.url, **_startup(target, avcluster.ClusterNode), **options)
        else:
            client = avalkey.Valkey.from_url(target.url, **options)
        conn = cls(client, wire=wire, cluster=cluster, max_payload_bytes=max_payload_bytes,
                   auto_pipeline=auto_pipeline)
        try:
            if cluster:
                try:
                    await client.initialize()
                except (*_WIRE_FAULTS, vexc.ValkeyClusterException) as exc:
                    raise _wire_error(exc) from exc
            await conn.ping()
            if wire == 6:
                await conn.require_native()
        except BaseException:
            await client.aclose()
            raise
        return conn

    async def _run(self, plan: _Plan) -> Any:
        try:
            op = next(plan)
            while True:
                try:
                    reply = await self._issue(op)
                except vexc.ResponseError as exc:
                    op = plan.throw(exc)
                else:
                    op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # LOADING: a reply
            raise _server_error(exc) from None
        except _WIRE_FAULTS as exc:
            raise _wire_error(exc) from exc

    async def execute(self, step: Step) -> Any:
        """Perform one step and return its raw reply (errors mapped)."""
        if isinstance(step, Eval) and step.via is not None:
            reply = step.via.eval(self, step.script, step.keys, step.args)
            return await reply if hasattr(reply, "__await__") else reply
        if self.auto_pipeline and type(step) is Eval:
            return await self._enqueue_call(step)
        return await self._run(self._plan(step))

    # -- auto-pipelining -----------------------------------------------------------------

    def _enqueue_call(self, step: Eval) -> asyncio.Future[Any]:
        """Queue one script step for this iteration's pipeline; its future gets the reply
        or the mapped error. Sizes are checked here, so a refusal raises at the caller."""
        args = self._command(step)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if not self._queued:
            loop.call_soon(self._flush_queued)
        self._queued.append((args, step, fut))
        return fut

    def _flush_queued(self) -> None:
        batch, self._queued = self._queued, []
        task = asyncio.ensure_future(self._flush(batch))
        self._flushing.add(task)  # held until done (the loop keeps only weak references)
        task.add_done_callback(self._flushing.discard)

    async def _flush(self, batch: list[tuple[tuple[Arg, ...], Eval, asyncio.Future[Any]]]
                     ) -> None:
        if len(batch) == 1:  # alone in its iteration: sent as it would be without batching
            _, step, fut = batch[0]
            try:
                reply = await self._run(self._plan(step))
            except BaseException as exc:
                _settle(fut, exc)
            else:
                _settle(fut, reply)
            return
        try:
            replies = list(await self._issue(_Pipe(tuple(args for args, _, _ in batch))))
            missing = [i for i, r in enumerate(replies) if isinstance(r, vexc.NoScriptError)]
            if missing:
                for name in dict.fromkeys(batch[i][1].script for i in missing):
                    await self._issue(self._load(name))
                again = await self._issue(_Pipe(tuple(batch[i][0] for i in missing)))
                for i, reply in zip(missing, again, strict=True):
                    replies[i] = reply
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # SCRIPT LOAD refused
            for _, _, fut in batch:
                _settle(fut, _server_error(exc))
            return
        except _WIRE_FAULTS as exc:
            for _, _, fut in batch:
                _settle(fut, _wire_error(exc))
            return
        except BaseException as exc:  # cancelled mid-flight: nobody is left waiting forever
            for _, _, fut in batch:
                _settle(fut, exc)
            raise
        for (_, _, fut), reply in zip(batch, replies, strict=True):
            if isinstance(reply, (vexc.ResponseError, vexc.BusyLoadingError)):
                reply = _server_error(reply)
            elif isinstance(reply, _WIRE_FAULTS):
                reply = _wire_error(reply)
            _settle(fut, reply)

    async def ping(self) -> None:
        await self._run(self._plan(Command(("PING",))))

    async def require_native(self) -> None:
        """Raise ``NativeUnavailable`` unless the server has the EMQ module loaded."""
        missing = self._native_missing(await self._run(self._modules_plan()))
        if missing:
            raise missing

    async def call(self, *args: Arg) -> Any:
        return await self.execute(Command(args))

    async def eval(self, script: str, keys: Iterable[str], args: Iterable[Arg]) -> Any:
        return await self.execute(Eval(script, tuple(keys), tuple(args)))

    async def close(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> AsyncConnector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _settle(fut: asyncio.Future[Any], outcome: Any) -> None:
    """Give one auto-pipelined caller its reply, or raise its error at it (unless it
    stopped waiting)."""
    if fut.done():
        return
    if isinstance(outcome, BaseException):
        fut.set_exception(outcome)
    else:
        fut.set_result(outcome)


async def _topology_guard(pending: Awaitable[Any]) -> Any:
    """Await an async cluster client's call. While it re-learns the topology after a
    primary died, valkey-py's async cluster client can trip over its own state (a default
    node or a stream writer that is None: AttributeError inside valkey); that is the same
    weather as the lost connection behind it, so it is raised as one."""
    try:
        return await pending
    except AttributeError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        if not frames or f"{os.sep}valkey{os.sep}" not in frames[-1].filename:
            raise  # ours: a bug, not weather
        raise vexc.ConnectionError(f"cluster topology is being refreshed ({exc})") from exc


def _startup(target: urls.Target, node: Any) -> dict[str, Any]:
    """The startup nodes beyond the URL's first (a cluster URL may list several)."""
    rest = target.nodes[1:]
    return {"startup_nodes": [node(h, p) for h, p in rest]} if rest else {}
