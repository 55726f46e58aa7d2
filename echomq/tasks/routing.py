"""The consumer side of the task layer: how a worker runs one job of a task.

``router(tasks)`` is what a ``Consumer`` calls per claimed job: payload -> task ->
``Route`` (``echomq.runtime.route``). A plain job runs its task's ``shared`` route, made at
the task's first job, with its decoded arguments left on the job: the per-job cost is one
parse and a few substring tests. ``route`` makes a job's own route (the handler,
in a child process for ``isolation="process"``, boxed for ``on_success``, traced when
OpenTelemetry is installed, with the task's retry policy); ``adapt`` makes a flow node's
from the ``flow`` marks of its payload (``echomq.tasks.canvas``): a kept result, a node's
own retry policy, a fed parent's children's results before its own arguments.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from echomq.core import codecs
from echomq.core.payload import PLAIN, Format, opened
from echomq.runtime import tracing
from echomq.runtime.callbacks import After
from echomq.runtime.handler import Job
from echomq.runtime.isolation import isolated
from echomq.runtime.route import Route, UnknownTask
from echomq.runtime.runner import Encoded
from echomq.tasks.defaults import TaskDefaults
from echomq.verbs import flows


class Handled(Protocol):
    """What a route is made from: a task's name, function, declared options and, for
    ``isolation="process"``, where a child process finds the function."""

    @property
    def name(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any]: ...

    @property
    def defaults(self) -> TaskDefaults: ...

    @property
    def ref(self) -> tuple[str, str] | None: ...


def route(task: Handled, args: list[Any], kwargs: dict[str, Any],
          trace: dict[str, str] | None = None) -> Route:
    """How a consumer runs one job of ``task`` with these decoded arguments (inside an
    ``echomq run`` span, a child of ``trace``, when OpenTelemetry is installed)."""
    d = task.defaults
    fn = task.fn
    chunker = getattr(task, "chunker", None)
    if chunker is not None:  # a chunk task: the job waits for its chunk's one call
        handler: Callable[[Job], Any] = chunker.join
    elif task.ref is not None:
        handler = isolated(task.ref, args, kwargs)
    elif inspect.iscoroutinefunction(fn):
        handler = _awaiting(fn, args, kwargs)
    else:
        handler = _calling(fn, args, kwargs)
    after = None
    if d.on_success is not None or d.on_failure is not None or d.on_retry is not None:
        after = After(task.name, args, kwargs, d.on_success, d.on_failure, d.on_retry)
        if d.on_success is not None:
            handler = boxed(handler, after.box)
    return _route(task, tracing.traced(handler, task.name, trace), after)


def _route(task: Handled, handler: Callable[[Job], Any], after: After | None = None) -> Route:
    """The ``Route`` of ``task``'s declared settings around ``handler``."""
    d = task.defaults
    return Route(handler, d.max_attempts, d.backoff, d.retry_delay_ms, d.lease_ms,
                 d.timeout_ms, d.keep_result_ms, name=task.name, retry_on=d.retry_on,
                 dont_retry_on=d.dont_retry_on, after=after)


def shared(task: Handled, fmt: Format = PLAIN) -> Route | None:
    """The one ``Route`` every plain job of ``task`` runs with, made once per task: its
    handler reads the job's decoded arguments (``Job._call``, left there by the router).
    ``None`` for a task whose jobs each need their own route: a chunk task, one isolated
    in a child process, one with callbacks (their ``After`` holds the job's arguments)."""
    d = task.defaults
    if (getattr(task, "chunker", None) is not None or task.ref is not None
            or d.on_success is not None or d.on_failure is not None or d.on_retry is not None):
        return None
    fn = task.fn
    handler = _awaiting_call(fn) if inspect.iscoroutinefunction(fn) else _calling_call(fn)
    return _route(task, handler if fmt is PLAIN else encoded(handler, fmt))


def router(tasks: Mapping[str, Handled], fmt: Format = PLAIN) -> Callable[[Job], Route]:
    """The consumer router over ``tasks`` (by name): payload -> task -> ``Route``;
    ``UnknownTask`` for a name none of them has."""

    # each task's shared route (None: its jobs get their own), made at its first job and
    # remade should the name come to mean another task
    made: dict[str, tuple[Handled, Route | None]] = {}

    def routed(job: Job) -> Route:
        payload = job.payload
        if codecs.sealed(payload):  # opened once: the call, its flow marks, its trace
            payload = codecs.unseal(payload, fmt.codec)
        name, args, kwargs = opened(payload, fmt)
        task = tasks.get(name)
        if task is None:
            known = ", ".join(sorted(tasks)) or "none"
            raise UnknownTask(name, f"unknown task {name!r}: this app has no task of "
                                    f"that name (its tasks: {known})")
        plan = made.get(name)
        if plan is None or plan[0] is not task:
            plan = made[name] = (task, shared(task, fmt))
        # the hot path: a plain job (no trace context, per-call timeout or flow marks, no
        # span to open) runs its task's shared route with its arguments on the job
        if (plan[1] is not None and b'"trace"' not in payload and b'"timeout":' not in payload
                and b'"flow":' not in payload and tracing.quiet()):
            job._call = (args, kwargs)
            return plan[1]
        # a flow node keeps its result for its parent; a fed parent gets its children's
        run = route(task, args, kwargs, tracing.carrier_of(payload))
        if b'"timeout":' in payload:  # a per-call timeout (task.options(timeout=))
            run = timed(run, payload)
        run = adapt(run, payload, task, args, kwargs, fmt)
        if fmt is not PLAIN:  # a kept value is written the app's way
            run = replace(run, handler=encoded(run.handler, fmt))
        return run

    return routed


def timed(run: Route, payload: bytes) -> Route:
    """``run`` with the handler timeout its payload carries (``"timeout"``, ms), if any."""
    try:
        body = json.loads(payload)
    except ValueError:
        return run
    ms = body.get("timeout") if isinstance(body, dict) else None
    if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0:
        return replace(run, timeout_ms=ms)
    return run


def _awaiting(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
              ) -> Callable[[Job], Any]:
    async def handler(_job: Job) -> Any:
        return await fn(*args, **kwargs)

    return handler


def _calling(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
             ) -> Callable[[Job], Any]:
    def handler(_job: Job) -> Any:
        return fn(*args, **kwargs)

    return handler


def _awaiting_call(fn: Callable[..., Any]) -> Callable[[Job], Any]:
    async def handler(job: Job) -> Any:
        args, kwargs = job._call or ([], {})
        return await fn(*args, **kwargs)

    return handler


def _calling_call(fn: Callable[..., Any]) -> Callable[[Job], Any]:
    def handler(job: Job) -> Any:
        args, kwargs = job._call or ([], {})
        return fn(*args, **kwargs)

    return handler


def encoded(handler: Callable[[Job], Any], fmt: Format) -> Callable[[Job], Any]:
    """``handler`` whose return value comes back with ``fmt``'s encoder (``Encoded``: run
    only when the value is kept)."""
    if inspect.iscoroutinefunction(handler):
        async def encoded_async(job: Job) -> Any:
            return Encoded(await handler(job), fmt.dumps)

        return encoded_async

    def encoded_sync(job: Job) -> Any:
        return Encoded(handler(job), fmt.dumps)

    return encoded_sync


def boxed(handler: Callable[[Job], Any], box: list[Any]) -> Callable[[Job], Any]:
    """``handler`` that also puts its return value in ``box`` (for ``on_success``)."""
    if inspect.iscoroutinefunction(handler):
        async def boxed_async(job: Job) -> Any:
            box[:] = [value := await handler(job)]
            return value

        return boxed_async

    def boxed_sync(job: Job) -> Any:
        box[:] = [value := handler(job)]
        return value

    return boxed_sync


# -- flow nodes ----------------------------------------------------------------------------

def feed_args(feed: str, children: Sequence[flows.Child], fmt: Format = PLAIN) -> list[Any]:
    """The arguments a fed parent gets before its own: for ``"one"`` its child's result,
    for ``"all"`` the list of its children's results (``None`` where none was kept)."""
    values = [fmt.loads(c.result) if c.result is not None else None for c in children]
    if feed == "one":
        return [values[0] if values else None]
    if feed == "all":
        return [values]
    return []


def marks(payload: bytes | str, fmt: Format = PLAIN) -> dict[str, Any]:
    """The ``flow`` marks of a node's payload (``{}`` for a plain job's)."""
    try:
        body = (fmt.serializer or json).loads(payload)
    except ValueError:
        return {}
    got = body.get("flow") if isinstance(body, dict) else None
    return got if isinstance(got, dict) else {}


def adapt(run: Route, payload: bytes, task: Handled, args: list[Any], kwargs: dict[str, Any],
          fmt: Format = PLAIN) -> Route:
    """The consumer ``Route`` for a flow node's payload (``run`` itself for a plain job):
    a node keeps its return value (``keep`` mark: its end then carries it to its parent)
    and a fed parent gets its children's results before its own arguments (``feed``)."""
    if b'"flow":' not in payload:  # a plain job: no second JSON parse on the hot path
        return run
    got = marks(payload, fmt)
    keep = got.get("keep")
    if isinstance(keep, int) and keep > 0:
        run = replace(run, keep_result_ms=max(run.keep_result_ms or 0, keep))
    retry = got.get("retry")
    if isinstance(retry, dict):
        run = _retried(run, retry)
    feed = got.get("feed")
    if feed in ("one", "all"):
        fed = _fed(task, args, kwargs, str(feed), fmt)
        if run.after is not None:  # on_success gets the fed parent's return value too
            fed = boxed(fed, run.after.box)
        run = replace(run, handler=fed)
    return run


def _retried(run: Route, retry: dict[str, Any]) -> Route:
    """``run`` with a node's own retry policy (its ``retry`` mark)."""
    def tupled(v: Any) -> Any:
        return tuple(tupled(i) for i in v) if isinstance(v, list) else v

    if isinstance(retry.get("max_attempts"), int):
        run = replace(run, max_attempts=retry["max_attempts"])
    if isinstance(retry.get("backoff"), list):
        run = replace(run, backoff=tupled(retry["backoff"]))
    if isinstance(retry.get("retry_delay_ms"), int):
        run = replace(run, retry_delay_ms=retry["retry_delay_ms"])
    return run


def _fed(task: Handled, args: list[Any], kwargs: dict[str, Any], feed: str,
         fmt: Format = PLAIN) -> Callable[[Job], Any]:
    """A handler that reads the job's children, then runs ``task`` with their results
    first (async for an async task, a plain function, run in a worker thread, otherwise)."""
    if inspect.iscoroutinefunction(task.fn):
        async def fed_async(job: Job) -> Any:
            kids = await job.achildren()
            out = route(task, [*feed_args(feed, kids, fmt), *args], kwargs).handler(job)
            return await out if inspect.isawaitable(out) else out

        return fed_async

    def fed(job: Job) -> Any:
        kids = job.children()
        return route(task, [*feed_args(feed, kids, fmt), *args], kwargs).handler(job)

    return fed
