"""The task payload: what ``Task.enqueue`` writes and the worker decodes.

The payload is JSON (stdlib ``json``: compact, keys sorted so equal calls give equal
bytes): ``{"args": [...], "kwargs": {...}, "task": "<name>"}``. An argument JSON cannot
carry raises ``TypeError`` naming it, before anything is written. A recurring
registration's template is exactly this payload (the Pump enqueues it verbatim).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from echomq.core import guards as guard

# one encoder for every payload: json.dumps with options builds a new one per call
_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)

try:  # _JSON's C encoder made once (JSONEncoder.encode makes one per call); no circular-
    # reference markers: a cycle ends in RecursionError, and encode_call then asks encode
    _C_JSON: Any = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _JSON.default, json.encoder.encode_basestring_ascii, None, ":", ",", True,
        False, False)
except (AttributeError, TypeError):  # pragma: no cover - no C accelerator, or a new signature
    _C_JSON = None


def encode(task: str, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
           trace: dict[str, str] | None = None, timeout_ms: int | None = None) -> bytes:
    """The job payload for calling ``task(*args, **kwargs)``: compact, sorted JSON bytes
    (with ``trace``, an OpenTelemetry context under the ``"trace"`` key: ``runtime.tracing``;
    with ``timeout_ms``, this call's handler timeout under ``"timeout"``, which the worker
    applies over the task's: ``task.options(timeout=...)``).

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
    try:
        # one encode for the common case: the per-argument diagnosis below runs only when
        # this fails, so a good call pays for its JSON once
        return _JSON.encode(body).encode()
    except (TypeError, ValueError, RecursionError) as failed:
        for where, value in [*((f"argument {i}", a) for i, a in enumerate(args)),
                             *((f"keyword argument {k!r}", v) for k, v in kwargs.items())]:
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise _unencodable(task, where, value, exc) from None
        if isinstance(failed, RecursionError):
            # an argument just under the limit on its own, two levels deeper in the body
            raise _unencodable(task, "the arguments", body, failed) from None
        raise


def encode_call(task: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """``encode(task, args, kwargs)`` for one call's own ``args`` tuple and ``kwargs`` dict
    (``f(*args, **kwargs)``: nobody else holds them, so they are not copied): the same bytes
    (JSON writes a tuple as a list) and, through ``encode``, the same errors. The per-call
    enqueue path: it skips the defensive copy ``encode`` makes."""
    if isinstance(task, str) and _C_JSON is not None:
        try:
            return "".join(_C_JSON({"task": task, "args": args, "kwargs": kwargs}, 0)).encode()
        except (TypeError, ValueError, RecursionError):
            pass
    return encode(task, args, kwargs)  # the diagnosis (or the same bytes)


def _unencodable(task: str, where: str, value: Any, exc: BaseException) -> TypeError:
    why = f"nested too deeply ({exc})" if isinstance(exc, RecursionError) else str(exc)
    return TypeError(f"{task}: {where} ({type(value).__name__}) is not JSON-serializable: {why}")


def decode(payload: bytes | str) -> tuple[str, list[Any], dict[str, Any]]:
    """``(task, args, kwargs)`` from a payload ``encode`` wrote (``ValueError`` otherwise)."""
    try:
        body = json.loads(payload)
        return str(body["task"]), list(body.get("args", [])), dict(body.get("kwargs", {}))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"not an EchoMQ task payload: {payload[:80]!r}") from exc
