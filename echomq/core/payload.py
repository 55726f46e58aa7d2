"""The task payload: what ``Task.enqueue`` writes and the worker decodes.

The payload is JSON (stdlib ``json``: compact, keys sorted so equal calls give equal
bytes): ``{"args": [...], "kwargs": {...}, "task": "<name>"}``. Values JSON cannot say
(datetime, UUID, Decimal, Enum, dataclasses, pydantic models, ...) travel tagged
(``core.serial``): a payload of plain values is plain JSON, byte for byte. An argument
the serializer cannot carry raises ``TypeError`` naming it, before anything is written.
A ``Format`` (an app's ``serializer=`` and ``codec=``) may replace the serializer and
wrap the bytes in a codec envelope (``core.codecs``); decoding reads the envelope. A recurring
registration's template is exactly this payload (the Pump enqueues it verbatim).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol

from echomq.core import codecs, serial
from echomq.core import guards as guard

# one encoder for every payload: json.dumps with options builds a new one per call; its
# default hook tags what JSON cannot say (called only for those: plain values pay nothing)
_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False,
                         default=serial.tag)


class Serializer(Protocol):
    """``App(serializer=...)``: values to text and back (``echomq.core.serial`` is the
    default); ``dumps`` raises ``TypeError``/``ValueError`` for what it cannot carry."""

    def dumps(self, value: Any) -> str: ...

    def loads(self, data: bytes | str) -> Any: ...


class Format(NamedTuple):
    """How an app writes payloads and kept results: its serializer (``None``: rich JSON)
    and codec chain (``None``: the bytes as serialized)."""

    serializer: Serializer | None = None
    codec: codecs.Chain | None = None

    def dumps(self, value: Any) -> bytes:
        """A kept result's bytes (serialized, then coded)."""
        text = (self.serializer or serial).dumps(value)
        data = text.encode() if isinstance(text, str) else text
        return data if self.codec is None else self.codec.seal("", data)

    def loads(self, data: bytes | str) -> Any:
        """The value ``dumps`` wrote (or a plain JSON one); ``codecs.Sealed`` without keys."""
        if codecs.sealed(data):
            data = codecs.unseal(data, self.codec)  # type: ignore[arg-type]
        return (self.serializer or serial).loads(data)


PLAIN = Format()

try:  # _JSON's C encoder made once (JSONEncoder.encode makes one per call); no circular-
    # reference markers: a cycle ends in RecursionError, and encode_call then asks encode
    _C_JSON: Any = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, serial.tag, json.encoder.encode_basestring_ascii, None, ":", ",", True,
        False, False)
except (AttributeError, TypeError):  # pragma: no cover - no C accelerator, or a new signature
    _C_JSON = None


def encode(task: str, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
           trace: dict[str, str] | None = None, timeout_ms: int | None = None,
           fmt: Format = PLAIN, flow: dict[str, Any] | None = None) -> bytes:
    """The job payload for calling ``task(*args, **kwargs)``: compact, sorted JSON bytes
    (with ``trace``, an OpenTelemetry context under the ``"trace"`` key: ``runtime.tracing``;
    with ``timeout_ms``, this call's handler timeout under ``"timeout"``, which the worker
    applies over the task's: ``task.options(timeout=...)``; with ``flow``, a flow node's
    marks), written the ``fmt`` way.

    Raises ``TypeError`` naming the argument JSON cannot carry (nothing is written).
    """
    guard.string("task", task)
    args = list(args)
    kwargs = dict(kwargs or {})
    body: dict[str, Any] = {"task": task, "args": args, "kwargs": kwargs}
    if trace:
        body["trace"] = trace
    if timeout_ms is not None:
        body["timeout"] = timeout_ms
    if flow:  # a flow node's marks (``tasks.canvas``), read by the worker only
        body["flow"] = flow
    if fmt is not PLAIN:
        return _formatted(task, body, fmt)
    try:
        # one encode for the common case: the per-argument diagnosis below runs only when
        # this fails, so a good call pays for its JSON once
        return _JSON.encode(body).encode()
    except (TypeError, ValueError, RecursionError) as failed:
        for where, value in [*((f"argument {i}", a) for i, a in enumerate(args)),
                             *((f"keyword argument {k!r}", v) for k, v in kwargs.items())]:
            try:
                serial.dumps(value)
            except (TypeError, ValueError, RecursionError) as exc:
                raise _unencodable(task, where, value, exc) from None
        if isinstance(failed, RecursionError):
            # an argument just under the limit on its own, two levels deeper in the body
            raise _unencodable(task, "the arguments", body, failed) from None
        raise


def _formatted(task: str, body: dict[str, Any], fmt: Format) -> bytes:
    try:
        text = (fmt.serializer or serial).dumps(body)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _unencodable(task, "the arguments", body, exc) from None
    data = text.encode() if isinstance(text, str) else text
    return data if fmt.codec is None else fmt.codec.seal(task, data)


def encode_call(task: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                fmt: Format = PLAIN) -> bytes:
    """``encode(task, args, kwargs)`` for one call's own ``args`` tuple and ``kwargs`` dict
    (``f(*args, **kwargs)``: nobody else holds them, so they are not copied): the same bytes
    (JSON writes a tuple as a list) and, through ``encode``, the same errors. The per-call
    enqueue path: it skips the defensive copy ``encode`` makes."""
    if fmt is not PLAIN:
        return encode(task, args, kwargs, fmt=fmt)
    if isinstance(task, str) and _C_JSON is not None:
        try:
            return "".join(_C_JSON({"task": task, "args": args, "kwargs": kwargs}, 0)).encode()
        except (TypeError, ValueError, RecursionError):
            pass
    return encode(task, args, kwargs)  # the diagnosis (or the same bytes)


def _unencodable(task: str, where: str, value: Any, exc: BaseException) -> TypeError:
    why = f"nested too deeply ({exc})" if isinstance(exc, RecursionError) else str(exc)
    return TypeError(f"{task}: {where} ({type(value).__name__}) is not JSON-serializable: {why}")


def decode(payload: bytes | str, fmt: Format = PLAIN) -> tuple[str, list[Any], dict[str, Any]]:
    """``(task, args, kwargs)`` from a payload ``encode`` wrote (``ValueError`` otherwise;
    ``codecs.Sealed``, a ``ValueError``, for an envelope this process has no key for)."""
    if codecs.sealed(payload):
        payload = codecs.unseal(payload, fmt.codec)  # type: ignore[arg-type]
    return opened(payload, fmt)


def opened(payload: bytes | str, fmt: Format = PLAIN
           ) -> tuple[str, list[Any], dict[str, Any]]:
    """``decode`` of a payload out of its envelope (a worker's router opened it to read
    its marks): once per job, so a body of the usual types is taken as it is."""
    try:
        body = (fmt.serializer or serial).loads(payload)
        task, args, kwargs = body["task"], body.get("args", []), body.get("kwargs", {})
        return (task if type(task) is str else str(task),
                args if type(args) is list else list(args),
                kwargs if type(kwargs) is dict else dict(kwargs))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        if isinstance(exc, serial.TagError):  # names the tag or class: more use than ours
            raise
        raise ValueError(f"not an EchoMQ task payload: {payload[:80]!r}") from exc


def task_of(payload: bytes | str, fmt: Format = PLAIN) -> str:
    """The task a payload names: an envelope's header says it without any key."""
    if codecs.sealed(payload):
        return codecs.header(payload)[1]  # type: ignore[arg-type]
    return decode(payload, fmt)[0]
