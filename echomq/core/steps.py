"""The sans-IO core: a verb describes its calls as steps, a connector does the I/O.

A transition is written once, as either a single ``Eval`` step with a ``decode`` function or
a generator that yields steps and receives their replies. ``drive`` runs it on whichever
connector it is given: on a ``Connector`` it returns the result, on an ``AsyncConnector`` it
returns an awaitable of the same result. Server refusals and lost connections (``THROWN``)
are thrown back into the generator at the ``yield`` that caused them (so a verb may
translate them, or try again), then propagate. A ``Pause`` step sends nothing: the driver
sleeps (``time.sleep`` or ``asyncio.sleep``), so a verb that waits between tries is still
written once.

Theory of operation, in the h11 sense: nothing in ``jobs``, ``repeat`` or ``groups`` opens a
socket or reads a clock it does not name; every byte on the wire is one of these steps.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import (
    Any,
    ClassVar,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    TypeAlias,
    TypeVar,
    overload,
)

from echomq.core import errors

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")
Arg: TypeAlias = str | bytes | int


@dataclass(frozen=True, slots=True)
class Eval:
    """Run script ``script`` with ``keys`` and ``args``; at wire 6 send ``native`` instead.

    ``native`` names the module command with the same tail (``numkeys keys... args...``).
    ``via``, when set, is an object with ``eval(conn, script, keys, args)`` the call is
    dispatched through instead of the connector (``enqueue_at``/``enqueue_in``'s
    ``via``: a caller's own dispatcher wraps or replaces the script call).
    """

    script: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]
    native: str | None = None
    via: Any = None


@dataclass(frozen=True, slots=True)
class Command:
    """A plain command, e.g. ``Command(("ZRANGEBYSCORE", key, "-inf", now))``.

    ``node`` (a name from a ``Nodes`` reply) sends a keyless command to that cluster
    primary; ``route`` (a key) sends it to the primary owning that key's slot, so a
    ``WAIT`` pipelined behind a queue's write rides the write's own connection; ``None``
    for both routes by the command's keys (both are ignored off a cluster)."""

    args: tuple[Arg, ...]
    node: str | None = None
    route: str | None = None


@dataclass(frozen=True, slots=True)
class Nodes:
    """Ask the connector which primaries hold data: their names on a cluster (for
    ``Command(node=...)``), ``[None]`` for a single server. No I/O of its own."""


@dataclass(frozen=True, slots=True)
class Native:
    """A module command with no scripted twin (``EMQ.RESCHEDULE``); needs wire 6."""

    command: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    """Several steps in one round trip (pipelined, not a transaction).

    The reply is a list in step order; a refused step's slot holds its ``ServerError``
    instead of raising, so one bad job does not hide the others' outcomes.
    """

    steps: tuple[Eval | Command | Native, ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` before the next step, sending nothing (a retry's back-off): the
    driver sleeps on the HOST monotonic clock, ``time.sleep`` in the sync driver and
    ``asyncio.sleep`` in the async one (the loop runs other tasks meanwhile). Its reply is
    ``None``. Never reaches a connector's ``execute``."""

    seconds: float


Step: TypeAlias = Eval | Command | Native | Batch | Nodes
Verb: TypeAlias = Generator[Step | Pause, Any, T]
Maybe: TypeAlias = T | Awaitable[T]


class Connector(Protocol):
    """What a sync connector offers a verb (``echomq.Connector`` is one): ``execute`` sends
    one step and returns its reply, or raises the ``ServerError`` for a refusal."""

    is_async: ClassVar[Literal[False]]

    def execute(self, step: Step) -> Any: ...


class AsyncConnector(Protocol):
    """What an asyncio connector offers a verb (``echomq.AsyncConnector`` is one): the same
    ``execute``, awaited."""

    is_async: ClassVar[Literal[True]]

    def execute(self, step: Step) -> Awaitable[Any]: ...


def single(step: Step, decode: Callable[[Any], T]) -> Verb[T]:
    """The generator for a one-step verb: send ``step``, decode its reply."""
    return decode((yield step))


def not_native(reply: Any) -> bool:
    """Whether ``reply`` is a native command's hand-back: an ``EMQSTATE ... not native``
    refusal, written nothing, for a case it leaves to its script (a grouped row, a flow
    link, a queue rate, ...)."""
    return isinstance(reply, errors.StateError) and str(reply).endswith("not native")


def native_or_script(step: Eval) -> Verb[Any]:
    """Send ``step`` (its native command at wire 6); a hand-back (``not_native``) sends its
    script instead, whose reply or refusal is the verb's. (The connector remembers the
    hand-back, and may send the script first for a while: ``connectors.memory``.)"""
    try:
        return (yield step)
    except errors.StateError as exc:
        if step.native is None or not not_native(exc):
            raise
    return (yield replace(step, native=None))


def batch_or_script(steps: tuple[Eval | Command | Native, ...]) -> Verb[list[Any]]:
    """``Batch(steps)``; the steps whose native command handed back (``not_native``) go
    again as their scripts, in a second round trip, their replies in their slots."""
    replies = list((yield Batch(steps)))
    again = [(i, s) for i, (s, r) in enumerate(zip(steps, replies, strict=True))
             if isinstance(s, Eval) and s.native is not None and not_native(r)]
    if again:
        more = yield Batch(tuple(replace(s, native=None) for _, s in again))
        for (i, _), reply in zip(again, more, strict=True):
            replies[i] = reply
    return replies


#: what ``drive`` throws back into a verb at the ``yield`` that caused it: a refusal, and a
#: connection lost or timed out (``WireError``, as the connectors raise valkey-py's
#: connection and timeout errors, or the builtins a connector of a caller's own may raise),
#: so a verb may decide to try again (``tasks.client``'s admission under ``retry_for``)
THROWN: tuple[type[BaseException], ...] = (
    errors.ServerError, errors.WireError, ConnectionError, TimeoutError)


def drive(conn: Connector | AsyncConnector, verb: Verb[T]) -> Maybe[T]:
    """Run ``verb`` on ``conn``: the result for a sync connector, an awaitable for async.
    A ``Pause`` sleeps on the HOST monotonic clock; the exceptions of ``THROWN`` go back
    into ``verb``."""
    # the loop sleeps a Pause itself: execute never sees one
    issue: Callable[[Step | Pause], Any] = conn.execute  # type: ignore[assignment]
    if conn.is_async:
        return run_async(issue, verb, THROWN)
    return run_sync(issue, verb, THROWN)


class VerbFn(Generic[P, T]):
    """A verb: ``verb(conn, *args)`` is the result on a ``Connector`` and an awaitable of
    it on an ``AsyncConnector`` (typed as such by the overloads below).

    The wrapped builder takes the verb's arguments without ``conn``, runs its guards
    eagerly (so bad input raises before any I/O, awaited or not) and returns the generator
    that describes the calls.
    """

    def __init__(self, build: Callable[P, Verb[T]]) -> None:
        self._build = build
        functools.update_wrapper(self, build)

    @overload
    def __call__(self, conn: Connector, /, *args: P.args, **kwargs: P.kwargs) -> T: ...

    @overload
    def __call__(
        self, conn: AsyncConnector, /, *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[T]: ...

    def __call__(self, conn: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        return drive(conn, self._build(*args, **kwargs))

    @overload
    def run(self, conn: Connector, steps: Verb[T], /) -> T: ...

    @overload
    def run(self, conn: AsyncConnector, steps: Verb[T], /) -> Awaitable[T]: ...

    def run(self, conn: Any, steps: Verb[T], /) -> Any:
        """Run steps this verb built earlier with ``steps(...)``: its guards ran then, so a
        caller can check its input before it has a connection (one that may start a
        server) without checking it twice."""
        return drive(conn, steps)

    def steps(self, *args: P.args, **kwargs: P.kwargs) -> Verb[T]:
        """The generator of this verb's steps, for a verb that runs another inside its own
        (``found = yield from other.steps(...)``)."""
        return self._build(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<verb {self._build.__module__}.{self._build.__qualname__}>"


def verb(build: Callable[P, Verb[T]]) -> VerbFn[P, T]:
    """Make ``build(*args) -> Verb[T]`` into a verb taking a connector first."""
    return VerbFn(build)


Faults: TypeAlias = tuple[type[BaseException], ...]


def _same(exc: BaseException) -> BaseException:
    return exc


def run_sync(issue: Callable[[S], Any], gen: Generator[S, Any, T],
             refused: type[BaseException] | Faults, faults: Faults = (),
             fault: Callable[[BaseException], BaseException] = _same) -> T:
    """The driver loop, written once for a verb on a connector (``drive``) and for a
    connector's plan of client calls: each item ``gen`` yields goes to ``issue``, its reply
    goes back in; a ``refused`` exception is thrown back in at the ``yield`` that caused it
    (the generator may translate it). A ``Pause`` item is slept here (``time.sleep``: HOST
    monotonic clock), never issued. An exception of ``faults`` that leaves the loop is
    raised as ``fault(exc)`` (which sets its own chaining)."""
    try:
        item = next(gen)
        while True:
            if isinstance(item, Pause):
                time.sleep(item.seconds)
                item = gen.send(None)
                continue
            try:
                reply = issue(item)
            except refused as exc:
                item = gen.throw(exc)
            else:
                item = gen.send(reply)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    except faults as exc:
        raise fault(exc)  # noqa: B904 - fault() sets the chaining


async def run_async(issue: Callable[[S], Awaitable[Any]], gen: Generator[S, Any, T],
                    refused: type[BaseException] | Faults, faults: Faults = (),
                    fault: Callable[[BaseException], BaseException] = _same) -> T:
    """``run_sync`` with each call awaited, and a ``Pause`` awaited as ``asyncio.sleep``
    (the loop's clock, monotonic on the HOST)."""
    try:
        item = next(gen)
        while True:
            if isinstance(item, Pause):
                await asyncio.sleep(item.seconds)
                item = gen.send(None)
                continue
            try:
                reply = await issue(item)
            except refused as exc:
                item = gen.throw(exc)
            else:
                item = gen.send(reply)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    except faults as exc:
        raise fault(exc)  # noqa: B904 - fault() sets the chaining


def text(value: Any) -> str:
    """A reply element as ``str`` (replies arrive as bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def as_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def pairs(flat: Sequence[Any]) -> dict[str, Any]:
    """``[k1, v1, k2, v2]`` (an HGETALL reply) as a dict with ``str`` keys."""
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}


def scored(reply: Any) -> list[tuple[Any, Any]]:
    """A ``... WITHSCORES`` reply as ``(member, score)`` pairs, flat or nested."""
    if not reply:
        return []
    if isinstance(reply[0], (list, tuple)):
        return [(m, s) for m, s in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))
