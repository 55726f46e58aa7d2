"""Connectors: the I/O edge. One sync (`Connector`) and one asyncio (`AsyncConnector`).

Both take a step from ``echomq.core.steps`` and return the raw reply. Scripts are sent
EVALSHA-first: the SHA is computed locally, and only a ``NOSCRIPT`` answer (a fresh
server, a ``SCRIPT FLUSH``, a failover to a replica that never saw ``SCRIPT LOAD``) costs a
``SCRIPT LOAD`` and one retry. ``wire=6`` sends the native module command where a step
names one and the script otherwise; the module must be loaded on the server, which
``connect`` checks with ``MODULE LIST`` so the failure comes at connect, not at the first
verb. ``cluster=True`` speaks to a Valkey Cluster: every step's keys share the queue's hash
tag, so the client routes it whole to the slot's owner.

What to send (and what to do on ``NOSCRIPT``) is decided once, in ``echomq.connectors.plan``: a
generator of client calls. The two connectors only differ in how they perform a call:
directly (here), or awaited (``echomq.connectors.aconnector``, with its auto-pipeline). Errors:
connection failures raise ``errors.WireError``; server refusals raise the
``errors.ServerError`` subclass for their text, the text kept exactly (``connectors.replies``).

Sizes: every argument is measured before a byte is sent. One over ``max_payload_bytes``
(default ``MAX_PAYLOAD_BYTES``, 64 MiB), or a command over ``MAX_COMMAND_BYTES`` in all
(512 MiB: the server drops a client whose query buffer passes 1 GiB, and refuses one bulk
string over ``proto-max-bulk-len``, 512 MiB), raises ``errors.PayloadTooLarge`` naming the
size and the limit; without it a 600 MB payload streamed out in full and then failed as a
connection reset.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Literal

import valkey
import valkey.cluster as vcluster
from valkey import exceptions as vexc

from echomq.connectors import urls
from echomq.connectors.kept import KeptConnection
from echomq.connectors.plan import (
    AUTO,
    MAX_PAYLOAD_BYTES,
    Base,
    Call,
    Pipe,
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
from echomq.connectors.steady import SteadySyncCluster
from echomq.core.steps import Arg, Command, Eval, Step, run_sync

__all__ = ["Connector"]


class Connector(Base):
    """A synchronous connector over a ``valkey.Valkey`` client (thread safe: it pools)."""

    is_async: ClassVar[Literal[False]] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # single calls ride one kept connection, skipping the pool's per-call checkout
        # (echomq.connectors.kept); a cluster client picks a node per call
        self._kept = None if self.cluster else KeptConnection(self.client)

    @classmethod
    def connect(
        cls, url: str, wire: int | str = 4, *, cluster: bool = False,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES, **options: Any
    ) -> Connector:
        """Connect to ``url`` (``valkey://``, ``valkeys://``, ``redis://``, ``rediss://``,
        ``unix://``; user and password in the URL). ``options`` go to the connection pool.
        ``max_payload_bytes`` bounds one argument (see the module docstring).

        ``cluster=True`` treats ``url`` as one startup node of a Valkey Cluster: the client
        discovers the rest and routes every step to the node owning its keys' slot (one
        queue = one hash tag = one slot).

        TLS (a ``valkeys://`` URL): ``tls_ca``, ``tls_cert``, ``tls_key``, ``tls_verify`` in
        ``options``, the URL's query or the environment (``echomq.connectors.tls``).

        ``wire``: 4 (scripts, the default), 6 (native commands; refused at connect unless
        the module is loaded on every node) or ``"auto"``: 6 when every node has the module,
        else 4, with the reason in ``conn.wire_reason``."""
        check_wire_choice(wire)
        check_payload_limit(max_payload_bytes)
        target = urls.parse(url)
        options.update(tls_options(target, options))
        cluster = cluster or target.cluster
        try:
            if cluster:
                factory: Any = SteadySyncCluster  # one refresh per 250 ms in a failover
                client = factory.from_url(
                    target.url, **startup(target, vcluster.ClusterNode), **options)
            else:
                client = valkey.Valkey.from_url(target.url, **options)
        except WIRE_FAULTS as exc:
            raise wire_error(exc) from exc
        except vexc.ValkeyClusterException as exc:  # no startup node answered
            raise wire_error(exc) from exc
        conn = cls(client, wire=4 if wire == AUTO else int(wire), cluster=cluster,
                   max_payload_bytes=max_payload_bytes)
        try:
            conn.ping()
            if wire == AUTO:
                conn.wire, conn.wire_reason = conn._run(conn._choose_plan())
            elif wire == 6:
                conn.require_native()
        except BaseException:
            client.close()
            raise
        return conn

    def _run(self, plan: Plan) -> Any:
        return run_sync(self._issue, plan, vexc.ResponseError, CLIENT_FAULTS, mapped)

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
        execute = self._kept.execute_command if self._kept else self.client.execute_command
        try:
            try:
                return execute(*args)
            except vexc.NoScriptError:
                load = self._load(step.script)
                execute(*load.args, **dict(load.kwargs))
                return execute(*args)
        except (vexc.ResponseError, vexc.BusyLoadingError) as exc:  # LOADING: a reply
            raise self._refusal(step, exc) from None
        except WIRE_FAULTS as exc:
            raise wire_error(exc) from exc

    def _issue(self, op: Call | Pipe) -> Any:
        if self._kept is not None and type(op) is Call and not op.kwargs:
            return self._kept.execute_command(*op.args)
        return super()._issue(op)

    def ping(self) -> None:
        """One ``PING`` round trip; raises ``errors.WireError`` when the server is gone."""
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
        """Close the kept connection and the pool."""
        if self._kept is not None:
            self._kept.close()
        self.client.close()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
