"""Optional OpenTelemetry spans: around each enqueue, and around each handler run, with the
trace context carried in the payload so a run joins the trace of the code that queued it.

Only when ``opentelemetry-api`` is importable (no dependency otherwise; nothing here runs
and payloads stay byte-for-byte what they were). The producer side opens a PRODUCER span
``echomq enqueue <task>`` while it builds the payload and, when the enqueue happens inside
a recorded trace, writes its W3C context under the payload's ``"trace"`` key; the consumer
side opens a CONSUMER span ``echomq run <task>`` whose parent is that context, and marks it
failed when the handler raises. The spans follow OpenTelemetry's messaging conventions loosely:
``messaging.system=echomq``, ``messaging.destination.name`` (the queue),
``messaging.message.id`` (the job id, on the run span).

No clock of ours: the spans are timed by the OpenTelemetry SDK the application installs.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

try:  # the API only: the application brings the SDK and its exporter
    from opentelemetry import propagate, trace
except ImportError:  # pragma: no cover - exercised where the API is not installed
    propagate = trace = None  # type: ignore[assignment]

ENABLED = trace is not None
try:  # the key the current span is kept under (private: without it, quiet() asks the API)
    from opentelemetry import context as _context
    from opentelemetry.trace.propagation import _SPAN_KEY
except ImportError:  # pragma: no cover - the API absent or reorganised
    _context = None  # type: ignore[assignment]
    _SPAN_KEY = None  # type: ignore[assignment]
# the API's own ContextVar of the current context (private: without it, get_value), read
# once per job by a worker's router: one call instead of the API's three
_CURRENT: contextvars.ContextVar[Any] | None = getattr(
    getattr(_context, "_RUNTIME_CONTEXT", None), "_current_context", None)
if not isinstance(_CURRENT, contextvars.ContextVar):  # pragma: no cover - another runtime
    _CURRENT = None
_NAME = "echomq"
# Set, this names a provider the API loads on first use: then spans are never skipped.
_ENV_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def quiet() -> bool:
    """True when a span opened here would record nothing and carry nothing: the API is
    installed but no SDK provider was ever set (the API's own default, whose spans are
    no-ops) and no trace is current (so there is no context to pass on). Then callers
    skip the span machinery, which costs more than the enqueue's own Python (~50 µs a
    call), with the same payload and the same (absent) spans. Reads the API's private
    ``_TRACER_PROVIDER`` (the public getter costs ~3 µs); should it ever go, this answers
    False and spans open as before."""
    if not ENABLED or _ENV_PROVIDER or getattr(trace, "_TRACER_PROVIDER", True) is not None:
        return not ENABLED
    if _SPAN_KEY is not None:
        current = _CURRENT.get() if _CURRENT is not None else _context.get_current()
        if current.get(_SPAN_KEY) is None:
            return True  # no span in the current context at all: the common case
    return not trace.get_current_span().get_span_context().is_valid


def _tracer() -> Any:
    assert trace is not None
    return trace.get_tracer(_NAME)


@contextlib.contextmanager
def enqueue_span(task: str, queue: str) -> Iterator[dict[str, str] | None]:
    """A PRODUCER span for one enqueue; yields the carrier (W3C ``traceparent``...) to put
    in the payload, or ``None`` when tracing is off, nothing records this trace, or the
    enqueue happens outside any trace (then the payload stays exactly as without tracing:
    equal calls, equal bytes)."""
    if not ENABLED:
        yield None
        return
    assert trace is not None and propagate is not None
    inside = trace.get_current_span().get_span_context().is_valid
    with _tracer().start_as_current_span(
        f"{_NAME} enqueue {task}", kind=trace.SpanKind.PRODUCER,
        attributes={"messaging.system": _NAME, "messaging.destination.name": queue,
                    "messaging.operation.type": "send", "echomq.task": task},
    ) as span:
        carrier: dict[str, str] = {}
        if inside and span.get_span_context().is_valid:
            propagate.inject(carrier)
        yield carrier or None


def carrier_of(payload: bytes | str) -> dict[str, str] | None:
    """The trace context a payload carries (``None`` without one, or when tracing is off)."""
    if not ENABLED:
        return None
    try:
        body = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    found = body.get("trace") if isinstance(body, dict) else None
    if not isinstance(found, dict):
        return None
    return {str(k): str(v) for k, v in found.items()}


@contextlib.contextmanager
def run_span(task: str, queue: str, job_id: str, carrier: dict[str, str] | None,
             attempt: int) -> Iterator[None]:
    """A CONSUMER span around one handler run, a child of the enqueue's context; an
    exception marks it failed (and goes on up)."""
    if not ENABLED:
        yield
        return
    assert trace is not None and propagate is not None
    parent = propagate.extract(carrier) if carrier else None
    with _tracer().start_as_current_span(
        f"{_NAME} run {task}", context=parent, kind=trace.SpanKind.CONSUMER,
        attributes={"messaging.system": _NAME, "messaging.destination.name": queue,
                    "messaging.operation.type": "process", "messaging.message.id": job_id,
                    "echomq.task": task, "echomq.attempt": attempt},
    ):
        yield


def traced(handler: Callable[[Any], Any], task: str,
           carrier: dict[str, str] | None) -> Callable[[Any], Any]:
    """``handler`` (sync or async, taking the ``Job``) run inside ``run_span``; itself
    when tracing is off."""
    if not ENABLED or (carrier is None and quiet()):
        return handler
    if inspect.iscoroutinefunction(handler):
        async def run_async(job: Any) -> Any:
            with run_span(task, job.queue, job.id, carrier, job.token):
                return await handler(job)

        return run_async

    def run(job: Any) -> Any:
        with run_span(task, job.queue, job.id, carrier, job.token):
            return handler(job)

    return run
