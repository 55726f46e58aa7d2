"""The plan: what each step sends, and what to do on ``NOSCRIPT``, written once.

``Base.plan`` turns a step into a generator of client calls (``Call``, or a ``Pipe`` of
several in one round trip); the sync ``Connector`` performs each call directly, the
``AsyncConnector`` awaits it. Sizes are checked here, before a byte is sent (see
``echomq.connectors.connector``'s docstring for the limits).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from valkey import exceptions as vexc

from echomq import native, scripts
from echomq.connectors import tls, urls
from echomq.connectors.memory import Memory
from echomq.connectors.replies import WIRE_FAULTS, server_error, topology_guard
from echomq.core import errors
from echomq.core.steps import Arg, Batch, Command, Eval, Native, Nodes, Step

WIRES = (4, 6)
#: ``wire=AUTO`` (what ``App`` and the worker use unless told): 6 when every node has the
#: module, 4 otherwise, decided at connect by one ``MODULE LIST`` (``Base._choose_plan``)
AUTO = "auto"
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
MAX_COMMAND_BYTES = 512 * 1024 * 1024
#: valkey-py's socket timeout (s) for one command when neither ``App(timeout=)`` nor the
#: URL's ``?socket_timeout=`` sets one
DEFAULT_TIMEOUT_S = 5.0
#: the room a blocking call leaves under the socket timeout for its reply to come back
#: (the server's timer, the round trip): a second, or half of a shorter timeout
BLOCK_MARGIN_S = 1.0


def check_payload_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"max_payload_bytes must be an int >= 1, not {limit!r}")
    if limit > MAX_COMMAND_BYTES:
        raise ValueError(f"max_payload_bytes must be at most {MAX_COMMAND_BYTES:,} "
                         f"(the server's proto-max-bulk-len), not {limit:,}")
    return limit


def check_wire(wire: int) -> int:
    if wire not in WIRES:
        raise ValueError(f"wire must be 4 (scripts) or 6 (native module), not {wire!r}")
    return wire


def check_wire_choice(wire: int | str) -> int | str:
    """``check_wire``, or ``AUTO`` (let the connect pick, see ``Base._choose_plan``)."""
    if wire == AUTO:
        return AUTO
    if wire not in WIRES:
        raise ValueError(f"wire must be 4 (scripts), 6 (native module) or {AUTO!r} (6 when "
                         f"every node has the module), not {wire!r}")
    return wire


def module_names(reply: Any) -> set[str]:
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


@dataclass(frozen=True, slots=True)
class Call:
    """One client command (``kwargs`` carries cluster routing, e.g. ``target_nodes``)."""

    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Pipe:
    """Commands pipelined in one round trip; the reply list holds exceptions in place."""

    calls: tuple[tuple[Arg, ...], ...]
    #: per call, its cluster routing (``target_nodes``), or () for all routed by keys
    kwargs: tuple[tuple[tuple[str, Any], ...], ...] = ()


Plan = Generator["Call | Pipe", Any, Any]


def socket_timeout(client: Any) -> float | None:
    """The socket timeout (s) a valkey-py client (single or cluster, sync or async) makes
    its connections with; ``None`` when it has none."""
    pool = getattr(client, "connection_pool", None)
    kwargs = (pool.connection_kwargs if pool is not None
              else getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None))
    if not isinstance(kwargs, dict):
        return DEFAULT_TIMEOUT_S
    got = kwargs.get("socket_timeout", DEFAULT_TIMEOUT_S)
    return None if got is None else float(got)


def check_size(value: str | bytes, limit: int) -> None:
    """Refuse one argument over ``limit`` bytes (UTF-8 for a ``str``) with the connector's
    own ``PayloadTooLarge`` text, for a caller that checks before anything is sent."""
    n = len(value)
    if n * 4 > limit and isinstance(value, str):
        n = len(value.encode())
    if n > limit:
        raise errors.PayloadTooLarge(
            f"payload is {n:,} bytes, over the limit of {limit:,} bytes "
            f"(max_payload_bytes; the server's own cap is proto-max-bulk-len); "
            f"nothing was sent", n, limit)


class Base:
    """What both connectors share: the plan for each step, and its reply handling."""

    is_async: ClassVar[bool] = False

    def __init__(self, client: Any, wire: int = 4, *, cluster: bool = False,
                 max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.client = client
        self.wire = check_wire(wire)
        #: why this wire: asked for, or what the startup check found (``_choose_plan``)
        self.wire_reason = f"wire={wire} asked for"
        self.cluster = cluster
        self.max_payload_bytes = check_payload_limit(max_payload_bytes)
        #: what this connector remembers of its traffic (``connectors.memory``)
        self.memory = Memory()
        #: seconds one command may take on the socket (``None``: no limit), as the client
        #: was made with; blocking calls are sized from it (``block_for``)
        self.timeout = socket_timeout(client)

    def block_for(self, wanted: float) -> float:
        """How long one blocking call (``BLPOP``, ``BLMOVE``) may block on this connector:
        ``wanted`` seconds, cut to a share of the socket timeout so the socket never gives
        up on a healthy wait (a longer wait is several calls)."""
        if self.timeout is None:
            return wanted
        room = max(self.timeout / 2, self.timeout - BLOCK_MARGIN_S)
        return max(0.005, min(wanted, room))

    def _sized(self, args: tuple[Arg, ...]) -> None:
        """Refuse an argument over ``max_payload_bytes`` (or a command over
        ``MAX_COMMAND_BYTES``) before anything is sent."""
        limit = self.max_payload_bytes
        # the common case in one pass (a bulk call carries thousands of arguments): no
        # argument near the limit, even at 4 bytes a char, and the sum under the cap
        sizes = [len(a) for a in args if type(a) is not int]  # type: ignore[arg-type]
        if not sizes or (max(sizes) * 4 <= limit and sum(sizes) <= MAX_COMMAND_BYTES):
            return
        total = 0
        for a in args:
            if type(a) is int:
                continue
            check_size(a, limit)  # type: ignore[arg-type]
            n = len(a)  # type: ignore[arg-type]
            total += len(a.encode()) if n * 4 > limit and isinstance(a, str) else n
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
        if (self.wire == 6 and step.native is not None
                and not self.memory.handbacks.scripted(step)):
            return (step.native, len(step.keys), *step.keys, *step.args)
        return ("EVALSHA", scripts.sha(step.script), len(step.keys), *step.keys, *step.args)

    def _refusal(self, step: Step, exc: Exception) -> errors.ServerError:
        """``exc``, a refusal of ``step``, as ours; a native command's hand-back is
        remembered (``memory.handbacks``)."""
        err = server_error(exc)
        if self.wire == 6 and type(step) is Eval and step.native is not None:
            self.memory.handbacks.saw(step, err)
        return err

    def _load(self, name: str) -> Call:
        # a cluster loads on every primary: the one that owns the slot may change
        kwargs = (("target_nodes", "primaries"),) if self.cluster else ()
        return Call(("SCRIPT", "LOAD", scripts.source(name)), kwargs)

    def _plan(self, step: Step) -> Plan:
        if isinstance(step, Batch):
            return (yield from self._plan_batch(step.steps))
        if isinstance(step, Nodes):
            return self._primaries()
        call = Call(self._command(step), self._target(step))
        try:
            try:
                return (yield call)
            except vexc.NoScriptError:
                if not isinstance(step, Eval):  # a plain EVALSHA someone sent: theirs
                    raise
                yield self._load(step.script)
                return (yield call)
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:
            raise self._refusal(step, exc) from None

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

    def _pipe(self, steps: Sequence[Eval | Command | Native]) -> Pipe:
        kwargs = tuple(self._target(s) for s in steps)
        return Pipe(tuple(self._command(s) for s in steps),
                     kwargs if any(kwargs) else ())

    def _plan_batch(self, steps: Sequence[Eval | Command | Native]) -> Plan:
        replies = list((yield self._pipe(steps)))
        # a cluster pipeline reports a lost node in place; the batch is then weather as a
        # whole (steps on healthy nodes may have run: at least once, never silently)
        lost = next((r for r in replies if isinstance(r, WIRE_FAULTS)), None)
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
        return [self._refusal(s, r) if isinstance(r, (vexc.ResponseError, vexc.BusyLoadingError))
                else r for s, r in zip(steps, replies, strict=True)]

    def _issue(self, op: Call | Pipe) -> Any:
        """Send one op: the reply on a sync client, an awaitable of it on an async one."""
        if isinstance(op, Pipe):
            pipe = self.client.pipeline(transaction=False)
            for i, args in enumerate(op.calls):
                pipe.execute_command(*args, **dict(op.kwargs[i] if op.kwargs else ()))
            sent = pipe.execute(raise_on_error=False)
        else:
            sent = self.client.execute_command(*op.args, **dict(op.kwargs))
        return topology_guard(sent) if self.cluster and self.is_async else sent

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

    def _modules_plan(self) -> Plan:
        if not self.cluster:
            return module_names((yield Call(("MODULE", "LIST"))))
        # a cluster asks every node (a failover promotes a replica), by target: the async
        # cluster client cannot route the keyless MODULE LIST by keys; {node: reply} back
        reply = yield Call(("MODULE", "LIST"), (("target_nodes", "all"),))
        if isinstance(reply, dict) and reply:
            return set.intersection(*(module_names(r) for r in reply.values()))
        return module_names(reply)

    def _choose_plan(self) -> Plan:
        """The startup check behind ``wire=AUTO``: (6, why) when the ``emq`` module is loaded
        on the server (on a cluster: on every node, replicas included, since a failover
        promotes one), else (4, why). An ACL user refused ``MODULE LIST`` gets 4."""
        try:
            names = yield from self._modules_plan()
        except vexc.ResponseError as exc:
            # an ACL user made for wire 4 may not list modules: scripts, said without the
            # server's refusal text (a worker's log is no place for a permission error)
            kind = "not allowed to this user" if isinstance(exc, vexc.NoPermissionError) \
                else "refused"
            return 4, f"MODULE LIST is {kind}, so scripts"
        where = "every node of the cluster" if self.cluster else "the server"
        if native.MODULE_NAME in names:
            return 6, f"the {native.MODULE_NAME} module is loaded on {where}"
        if self.cluster:
            return 4, f"not every node of the cluster has the {native.MODULE_NAME} module"
        return 4, (f"the server has no {native.MODULE_NAME} module (MODULE LIST shows "
                   f"{sorted(names) or 'none'})")

    @staticmethod
    def _native_missing(names: set[str]) -> errors.NativeUnavailable | None:
        if native.MODULE_NAME in names:
            return None
        reason = native.unavailable_reason()
        fix = (f"and this install has none to load: {reason}" if reason else
               "start the server with --loadmodule echomq.native.module_path(), or use wire=4")
        return errors.NativeUnavailable(
            f"wire=6 needs the {native.MODULE_NAME!r} module loaded on the server "
            f"(MODULE LIST shows {sorted(names) or 'none'}); {fix}"
        )

    def __repr__(self) -> str:
        kind = " cluster" if self.cluster else ""
        return f"<{type(self).__name__} wire={self.wire}{kind} {self.client!r}>"


def tls_options(target: urls.Target, explicit: dict[str, Any]) -> dict[str, Any]:
    """The valkey-py options of ``target``'s TLS settings (``connectors.tls``): the keyword
    arguments in ``explicit`` (``tls_ca`` ...; taken out of it) over the URL's query over
    the environment; ``{}`` for a plain URL. Refusals raise before any I/O."""
    given = {name: explicit.pop(name, None) for name in tls.NAMES}
    settings = tls.resolve(target.tls, dict(target.tls_query), given)
    return settings.client_options() if settings is not None else {}


def startup(target: urls.Target, node: Any) -> dict[str, Any]:
    """The startup nodes beyond the URL's first (a cluster URL may list several)."""
    rest = target.nodes[1:]
    return {"startup_nodes": [node(h, p) for h, p in rest]} if rest else {}
