"""Connectors: the I/O edge. One sync (`Connector`) and one asyncio (`AsyncConnector`).

Both take a step from ``echomq.steps`` and return the raw reply. Scripts are sent
EVALSHA-first: the SHA is computed locally, and only a ``NOSCRIPT`` answer (a fresh
server, a ``SCRIPT FLUSH``, a failover to a replica that never saw ``SCRIPT LOAD``) costs a
``SCRIPT LOAD`` and one retry. ``wire=6`` sends the native module command where a step
names one and the script otherwise; the module must be loaded on the server, which
``connect`` checks with ``MODULE LIST`` so the failure comes at connect, not at the first
verb.

Errors: connection failures raise ``errors.WireError``; server refusals raise the
``errors.ServerError`` subclass for their text, the text kept exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

import valkey
import valkey.asyncio as avalkey
from valkey import exceptions as vexc

from . import errors, scripts
from .steps import Arg, Batch, Command, Eval, Native, Step

WIRES = (4, 6)
NATIVE_MODULE = "emq"
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _server_error(exc: vexc.ResponseError) -> errors.ServerError:
    # valkey-py strips a leading "ERR " from error replies; the contract keeps texts exact,
    # so a reply whose first word is not an error code gets its "ERR " back.
    text = str(exc)
    if not _CODE.match(text.split(" ", 1)[0]):
        text = "ERR " + text
    return errors.from_server(text)


def _wire_error(exc: BaseException) -> errors.WireError:
    return errors.WireError(f"{type(exc).__name__}: {exc}")


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


class _Base:
    """What both connectors share: command shapes and reply handling."""

    is_async: ClassVar[bool] = False

    def __init__(self, client: Any, wire: int = 4) -> None:
        self.client = client
        self.wire = _check_wire(wire)

    def _uses_native(self, step: Eval) -> bool:
        return self.wire == 6 and step.native is not None

    def _command(self, step: Eval | Command | Native) -> tuple[Arg, ...]:
        if isinstance(step, Command):
            return step.args
        if isinstance(step, Native):
            if self.wire != 6:
                raise errors.ConfigError(f"{step.command} is native only: connect with wire=6")
            return (step.command, len(step.keys), *step.keys, *step.args)
        if self._uses_native(step):
            assert step.native is not None
            return (step.native, len(step.keys), *step.keys, *step.args)
        return ("EVALSHA", scripts.sha(step.script), len(step.keys), *step.keys, *step.args)

    @staticmethod
    def _noscript(step: Eval | Command | Native, exc: BaseException) -> bool:
        return isinstance(step, Eval) and isinstance(exc, vexc.NoScriptError)

    @staticmethod
    def _fix(reply: Any) -> Any:
        if isinstance(reply, vexc.ResponseError):
            return _server_error(reply)
        return reply

    def __repr__(self) -> str:
        return f"<{type(self).__name__} wire={self.wire} {self.client!r}>"


class Connector(_Base):
    """A synchronous connector over a ``valkey.Valkey`` client (thread safe: it pools)."""

    @classmethod
    def connect(cls, url: str, wire: int = 4, **options: Any) -> Connector:
        """Connect to ``url`` (``valkey://``, ``valkeys://``, ``redis://``, ``rediss://``,
        ``unix://``; user and password in the URL). ``options`` go to the connection pool."""
        _check_wire(wire)
        client = valkey.Valkey.from_url(_normalize(url), **options)
        conn = cls(client, wire=wire)
        conn.ping()
        if wire == 6:
            conn.require_native()
        return conn

    def ping(self) -> None:
        try:
            self.client.ping()
        except (vexc.ConnectionError, vexc.TimeoutError, OSError) as exc:
            raise _wire_error(exc) from exc

    def require_native(self) -> None:
        """Raise ``NativeUnavailable`` unless the server has the EMQ module loaded."""
        names = _module_names(self.call("MODULE", "LIST"))
        if NATIVE_MODULE not in names:
            raise errors.NativeUnavailable(
                f"wire=6 needs the {NATIVE_MODULE!r} module loaded on the server "
                f"(MODULE LIST shows {sorted(names) or 'none'}); start the server with "
                "--loadmodule echomq.native.module_path(), or use wire=4"
            )

    def call(self, *args: Arg) -> Any:
        """Send one plain command and return its reply (errors mapped)."""
        return self.execute(Command(args))

    def eval(self, script: str, keys: Iterable[str], args: Iterable[Arg]) -> Any:
        """Run a named script EVALSHA-first (the default ``via`` dispatcher)."""
        return self.execute(Eval(script, tuple(keys), tuple(args)))

    def execute(self, step: Step) -> Any:
        try:
            if isinstance(step, Batch):
                return self._batch(step)
            if isinstance(step, Eval) and step.via is not None:
                return step.via.eval(self, step.script, step.keys, step.args)
            try:
                return self.client.execute_command(*self._command(step))
            except vexc.NoScriptError:
                assert isinstance(step, Eval)
                self.client.execute_command("SCRIPT", "LOAD", scripts.source(step.script))
                return self.client.execute_command(*self._command(step))
        except vexc.ResponseError as exc:
            raise _server_error(exc) from None
        except (vexc.ConnectionError, vexc.TimeoutError, OSError) as exc:
            raise _wire_error(exc) from exc

    def _batch(self, batch: Batch) -> list[Any]:
        replies = self._pipeline(batch.steps)
        retry = [i for i, (s, r) in enumerate(zip(batch.steps, replies, strict=True))
                 if self._noscript(s, r)]
        if retry:
            for name in {batch.steps[i].script for i in retry}:  # type: ignore[union-attr]
                self.client.execute_command("SCRIPT", "LOAD", scripts.source(name))
            again = self._pipeline([batch.steps[i] for i in retry])
            for i, reply in zip(retry, again, strict=True):
                replies[i] = reply
        return [self._fix(r) for r in replies]

    def _pipeline(self, steps: Iterable[Eval | Command | Native]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for step in steps:
            pipe.execute_command(*self._command(step))
        return list(pipe.execute(raise_on_error=False))

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnector(_Base):
    """An asyncio connector over ``valkey.asyncio.Valkey``; the same verbs, awaited."""

    is_async: ClassVar[bool] = True

    @classmethod
    async def connect(cls, url: str, wire: int = 4, **options: Any) -> AsyncConnector:
        """Connect to ``url``; see ``Connector.connect``."""
        _check_wire(wire)
        client = avalkey.Valkey.from_url(_normalize(url), **options)
        conn = cls(client, wire=wire)
        try:
            await conn.ping()
            if wire == 6:
                await conn.require_native()
        except BaseException:
            await client.aclose()
            raise
        return conn

    async def ping(self) -> None:
        try:
            await self.client.ping()
        except (vexc.ConnectionError, vexc.TimeoutError, OSError) as exc:
            raise _wire_error(exc) from exc

    async def require_native(self) -> None:
        """Raise ``NativeUnavailable`` unless the server has the EMQ module loaded."""
        names = _module_names(await self.call("MODULE", "LIST"))
        if NATIVE_MODULE not in names:
            raise errors.NativeUnavailable(
                f"wire=6 needs the {NATIVE_MODULE!r} module loaded on the server "
                f"(MODULE LIST shows {sorted(names) or 'none'}); start the server with "
                "--loadmodule echomq.native.module_path(), or use wire=4"
            )

    async def call(self, *args: Arg) -> Any:
        return await self.execute(Command(args))

    async def eval(self, script: str, keys: Iterable[str], args: Iterable[Arg]) -> Any:
        return await self.execute(Eval(script, tuple(keys), tuple(args)))

    async def execute(self, step: Step) -> Any:
        try:
            if isinstance(step, Batch):
                return await self._batch(step)
            if isinstance(step, Eval) and step.via is not None:
                reply = step.via.eval(self, step.script, step.keys, step.args)
                return await reply if hasattr(reply, "__await__") else reply
            try:
                return await self.client.execute_command(*self._command(step))
            except vexc.NoScriptError:
                assert isinstance(step, Eval)
                await self.client.execute_command("SCRIPT", "LOAD", scripts.source(step.script))
                return await self.client.execute_command(*self._command(step))
        except vexc.ResponseError as exc:
            raise _server_error(exc) from None
        except (vexc.ConnectionError, vexc.TimeoutError, OSError) as exc:
            raise _wire_error(exc) from exc

    async def _batch(self, batch: Batch) -> list[Any]:
        replies = await self._pipeline(batch.steps)
        retry = [i for i, (s, r) in enumerate(zip(batch.steps, replies, strict=True))
                 if self._noscript(s, r)]
        if retry:
            for name in {batch.steps[i].script for i in retry}:  # type: ignore[union-attr]
                await self.client.execute_command("SCRIPT", "LOAD", scripts.source(name))
            again = await self._pipeline([batch.steps[i] for i in retry])
            for i, reply in zip(retry, again, strict=True):
                replies[i] = reply
        return [self._fix(r) for r in replies]

    async def _pipeline(self, steps: Iterable[Eval | Command | Native]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for step in steps:
            pipe.execute_command(*self._command(step))
        return list(await pipe.execute(raise_on_error=False))

    async def close(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> AsyncConnector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _normalize(url: str) -> str:
    """valkey-py knows valkey://, valkeys://, redis://, rediss:// and unix://."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"not a server URL: {url!r} (expected valkey://host:port/db)")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in ("valkey", "valkeys", "redis", "rediss", "unix"):
        raise ValueError(f"unsupported URL scheme {scheme!r}")
    return url
