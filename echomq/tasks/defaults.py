"""``TaskDefaults``: what ``@app.task(...)`` declares, checked once (as ``jobs.Options.of``).

Units (the rule ``docs/guide/tasks.md`` states): a schedule quantity (``retry_delay_ms``,
``lease_ms``, a ``backoff`` list, ``expires``) is milliseconds as a bare int; a wait or a
retention (``timeout``, ``keep_result``) is seconds as a bare number; a ``timedelta`` is
accepted for any of them. Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime as dt
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from echomq.core import backoff as backoff_mod
from echomq.core import guards as guard
from echomq.core import keyspace, rates
from echomq.core import partitions as parts
from echomq.core.options import Deadline, Group, check_expires, check_group
from echomq.core.times import seconds_to_ms
from echomq.runtime import callbacks as callbacks_mod
from echomq.runtime.callbacks import Callback
from echomq.runtime.isolation import reference
from echomq.runtime.route import DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY_MS
from echomq.runtime.verdict import Classes, exception_classes

#: a ``keep_result`` (seconds) this long looks like milliseconds given by mistake: a day
#: in ms read as seconds is 2.7 years
IMPLAUSIBLE_KEEP_S = 86_400_000


class TaskOptions(TypedDict, total=False):
    """The keywords ``@app.task(...)`` takes (see ``TaskDefaults`` for each one's meaning
    and unit)."""

    queue: str | None
    name: str | None
    max_attempts: int
    backoff: backoff_mod.Policy | None
    retry_delay_ms: int
    lease_ms: int
    timeout: float | dt.timedelta | None
    keep_result: float | dt.timedelta | None
    isolation: str
    group: Group | None
    partitions: int
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None
    dont_retry_on: type[BaseException] | tuple[type[BaseException], ...]
    check_args: bool
    rate: str | tuple[int, Any] | None
    on_success: Callback | None
    on_failure: Callback | None
    on_retry: Callback | None
    expires: int | dt.timedelta | dt.datetime | None
    # tenant controls (issue 36): the group from an argument, every group's defaults, the
    # queue-wide cap; applied like ``rate`` when a worker starts
    group_by: str | Callable[..., str | None] | None
    group_limit: int | None
    group_rate: str | tuple[int, Any] | None
    queue_limit: int | None
    # chunks (issue 36): the handler called once with up to `chunk` jobs
    chunk: int | None
    chunk_wait: float | dt.timedelta | None


@dataclass(frozen=True, slots=True)
class TaskDefaults:
    """A task's declared options, checked (``of``), in their canonical units.

    - ``queue``: the queue its runs go to (``partitions`` > 1 spreads it over ``queue#0``
      ...); ``name``: its registered name (``None``: the function's module and qualname).
    - ``max_attempts`` (default 25) runs before dead-lettering; ``retry_delay_ms`` (ms,
      default 1000) or a ``backoff`` policy (a list of delays is ms or ``timedelta``s);
      ``lease_ms`` (ms, default 30 s) the lease a running job holds.
    - ``timeout_ms``/``keep_result_ms``: given as ``timeout``/``keep_result`` in SECONDS
      (or a ``timedelta``), held in ms.
    - ``group``, ``expires`` (ms after admission, a ``timedelta`` or a ``datetime``):
      the admission defaults every run starts from (``task.options`` overrides them).
    - ``retry_on``/``dont_retry_on``, ``rate`` (``(max, per_ms)``), the callbacks,
      ``check_args``, ``isolation`` (``"thread"`` or ``"process"``).
    - ``tenants``: ``group_by``/``group_limit``/``group_rate``/``queue_limit`` (``Tenants``;
      ``None`` when none is given).
    - ``chunk`` (jobs per handler call, ``None``: one) and ``chunk_wait_ms`` (given as
      ``chunk_wait`` in SECONDS or a ``timedelta``; default 1 s): ``echomq.tasks.chunks``.
    """

    queue: str
    name: str | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: backoff_mod.Policy | None = None
    retry_delay_ms: int = DEFAULT_RETRY_DELAY_MS
    lease_ms: int = DEFAULT_LEASE_MS
    timeout_ms: int | None = None
    keep_result_ms: int | None = None
    isolation: str = "thread"
    group: Group | None = None
    partitions: int = 1
    retry_on: Classes | None = None
    dont_retry_on: Classes = ()
    check_args: bool = True
    rate: tuple[int, int] | None = None
    on_success: Callback | None = None
    on_failure: Callback | None = None
    on_retry: Callback | None = None
    expires: Deadline | None = None
    tenants: Tenants | None = None
    chunk: int | None = None
    chunk_wait_ms: int = 1000

    @classmethod
    def of(cls, default_queue: str, **options: Any) -> TaskDefaults:
        """``@app.task``'s keywords (``TaskOptions``) checked, before any I/O: the queue
        (``default_queue`` when none is given) and every option, in canonical units."""
        unknown = options.keys() - TaskOptions.__annotations__.keys()
        if unknown:
            raise TypeError(f"@app.task got unexpected keyword argument(s): "
                            f"{', '.join(sorted(unknown))}")
        o: TaskOptions = options  # type: ignore[assignment]
        queue = keyspace.validate_queue(o.get("queue") or default_queue)
        partitions = o.get("partitions", 1)
        parts.validate(queue, partitions)
        name = o.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"a task name must be a non-empty str, not {name!r}")
        group, expires, policy = o.get("group"), o.get("expires"), o.get("backoff")
        max_attempts = o.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
        guard.positive("max_attempts", max_attempts)
        retry_delay_ms = o.get("retry_delay_ms", DEFAULT_RETRY_DELAY_MS)
        guard.span("retry_delay_ms", retry_delay_ms)
        lease_ms = o.get("lease_ms", DEFAULT_LEASE_MS)
        guard.span("lease_ms", lease_ms, minimum=1)
        keep_result = o.get("keep_result")
        if isinstance(keep_result, int | float) and keep_result >= IMPLAUSIBLE_KEEP_S:
            warnings.warn(f"keep_result={keep_result} is SECONDS ({keep_result / 86_400:.0f} "
                          "days); pass a timedelta, or seconds, if milliseconds were meant",
                          stacklevel=4)
        check_args = o.get("check_args", True)
        if not isinstance(check_args, bool):
            raise TypeError(f"check_args is True or False, not {check_args!r}")
        rate = o.get("rate")
        callbacks = {n: callbacks_mod.check(n, options.get(n))
                     for n in ("on_success", "on_failure", "on_retry")}
        return cls(
            queue=queue, name=name, max_attempts=max_attempts,
            backoff=None if policy is None else backoff_mod.normalize(policy),
            retry_delay_ms=retry_delay_ms, lease_ms=lease_ms,
            timeout_ms=seconds_to_ms("timeout", o.get("timeout")),
            keep_result_ms=seconds_to_ms("keep_result", keep_result),
            isolation=o.get("isolation", "thread"),
            group=None if group is None else check_group(group), partitions=partitions,
            retry_on=exception_classes("retry_on", o.get("retry_on")),
            dont_retry_on=exception_classes("dont_retry_on", o.get("dont_retry_on", ())) or (),
            check_args=check_args, rate=None if rate is None else rates.parse(rate),
            expires=None if expires is None else check_expires(expires),
            tenants=Tenants.of(o), chunk=_chunk(o.get("chunk")),
            chunk_wait_ms=seconds_to_ms("chunk_wait", o.get("chunk_wait", 1.0)) or 0,
            **callbacks,
        )


def _chunk(size: object) -> int | None:
    """``chunk=``: ``None`` (one job per call), or a whole number >= 1 of jobs per call."""
    if size is None:
        return None
    return guard.positive("chunk", size)


@dataclass(frozen=True, slots=True)
class Tenants:
    """A task's tenant controls, checked: ``group_by`` (an argument's name, or a function
    of the arguments, giving each run's group), ``group_limit``/``group_rate`` (``(max,
    per_ms)``: the defaults of every group of the queue without its own setting) and
    ``queue_limit`` (the queue-wide cap). The last three are applied on the server when a
    worker starts (``echomq.tasks.tenants``)."""

    group_by: str | Callable[..., str | None] | None = None
    group_limit: int | None = None
    group_rate: tuple[int, int] | None = None
    queue_limit: int | None = None

    @classmethod
    def of(cls, o: TaskOptions) -> Tenants | None:
        """The tenant keywords of ``o`` checked; ``None`` when none is given."""
        if not {"group_by", "group_limit", "group_rate", "queue_limit"} & o.keys():
            return None
        by = o.get("group_by")
        if by is not None and not callable(by) and not (isinstance(by, str) and by.isidentifier()):
            raise TypeError(f"group_by is an argument's name or a function of the arguments, "
                            f"not {by!r}")
        if by is not None and o.get("group") is not None:
            raise TypeError("give group= or group_by=, not both")
        limit, cap, rate = o.get("group_limit"), o.get("queue_limit"), o.get("group_rate")
        for name, value in (("group_limit", limit), ("queue_limit", cap)):
            if value is not None:
                guard.positive(name, value)
        return cls(group_by=by, group_limit=limit,
                   group_rate=None if rate is None else rates.parse(rate), queue_limit=cap)


def check_isolation(fn: Callable[..., Any], isolation: str) -> tuple[str, str] | None:
    """Where a child process finds ``fn`` for ``isolation="process"`` (``None`` for the
    default ``"thread"``); ``ValueError`` for anything else, or an ``async def``."""
    if isolation == "thread":
        return None
    if isolation != "process":
        raise ValueError(f"isolation must be 'thread' or 'process', not {isolation!r}")
    if inspect.iscoroutinefunction(fn):
        raise ValueError("isolation='process' is for plain functions; an async handler is "
                         "already cancelled at its timeout or cancel request")
    return reference(fn)


def default_name(fn: Callable[..., Any]) -> str:
    """A task's name when none is given: ``module.qualname`` (just the qualname in
    ``__main__``)."""
    module = str(getattr(fn, "__module__", None) or "")
    qual = str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "task"))
    return f"{module}.{qual}" if module and module != "__main__" else qual
