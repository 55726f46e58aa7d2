"""What is enqueued: ``enqueued``, ``assert_enqueued`` and ``refute_enqueued``.

They read the jobs that wait (pending, a group's lane, the schedule: ``verbs.testbed``)
on the queues asked for, and match them after the same JSON round trip the payload makes
(``core.payload``), so ``(1, 2)`` matches the ``[1, 2]`` a job carries. ``args`` matches
the positional arguments exactly; ``kwargs`` matches as a subset (the keyword arguments
named must be there with those values; others may be too), as Oban's ``args`` do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from echomq.core.payload import decode, encode
from echomq.verbs import testbed
from echomq.verbs.status import JobInfo

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.task import Task

_MISSING = object()


def _name(task: Task[Any, Any] | str | None) -> str | None:
    return task if task is None or isinstance(task, str) else task.name


def _queues(app: App, task: Task[Any, Any] | str | None, queue: str | None) -> list[str]:
    if queue is not None:
        return app.expand([queue])
    if task is not None and not isinstance(task, str):
        return list(task.queues)
    named = app.tasks.get(task) if isinstance(task, str) else None
    if named is not None:
        return list(named.queues)
    return list(dict.fromkeys([*app.queues(), *(r.queue for r in app.recurrences),
                               app.default_queue]))


def _round_trip(args: Sequence[Any] | None, kwargs: dict[str, Any] | None
                ) -> tuple[list[Any] | None, dict[str, Any] | None]:
    """``args``/``kwargs`` as a job carries them (through the payload's JSON)."""
    _task, a, kw = decode(encode("match", list(args or ()), dict(kwargs or {})))
    return (None if args is None else a), (None if kwargs is None else kw)


def _matches(info: JobInfo, name: str | None, args: list[Any] | None,
             kwargs: dict[str, Any] | None) -> bool:
    if name is not None and info.task != name:
        return False
    if args is not None and info.args != args:
        return False
    return kwargs is None or all(info.kwargs.get(k, _MISSING) == v for k, v in kwargs.items())


def _waiting(app: App, queues: Iterable[str]) -> list[JobInfo]:
    conn = app.connector()
    return [info for q in queues for info in testbed.waiting(conn, q)]


def enqueued(app: App, task: Task[Any, Any] | str | None = None, *, queue: str | None = None,
             args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None
             ) -> list[JobInfo]:
    """The waiting jobs (pending, a lane, scheduled) of ``task`` (a ``Task`` or a task
    name; ``None``: any) on ``queue`` (default: the task's queue, or every queue of the
    app), with these ``args`` (exactly) and ``kwargs`` (a subset), in claim order then
    run-at order. Each is a ``JobInfo`` (``.id``, ``.task``, ``.args``, ``.kwargs``,
    ``.state``, ``.run_at``, ``.priority``, ``.group``)."""
    want_args, want_kwargs = _round_trip(args, kwargs)
    name = _name(task)
    return [info for info in _waiting(app, _queues(app, task, queue))
            if _matches(info, name, want_args, want_kwargs)]


def _call(name: str | None, args: Sequence[Any] | None, kwargs: dict[str, Any] | None) -> str:
    parts = [] if args is None else [f"args={list(args)!r}"]
    if kwargs is not None:
        parts.append(f"kwargs ⊇ {kwargs!r}")
    return f"{name or 'any task'}({', '.join(parts)})"


def _listing(app: App, queues: list[str]) -> str:
    jobs = _waiting(app, queues)
    if not jobs:
        return f"nothing is enqueued on {', '.join(queues)}"
    lines = [f"  {j.queue}: {j.task}(args={j.args!r}, kwargs={j.kwargs!r}) {j.state} {j.id}"
             for j in jobs]
    return "enqueued:\n" + "\n".join(lines)


def _app(task: Task[Any, Any]) -> App:
    """The App ``task`` was declared on (the kit reads through an App, not any producer)."""
    from echomq.tasks.app import App

    if not isinstance(task.app, App):
        raise TypeError(f"{task.name} is not declared on an echomq.App")
    return task.app


def assert_enqueued(task: Task[Any, Any], *, args: Sequence[Any] | None = None,
                    kwargs: dict[str, Any] | None = None, queue: str | None = None,
                    count: int | None = None) -> list[JobInfo]:
    """Assert that jobs of ``task`` with these ``args``/``kwargs`` wait on ``queue``
    (default: the task's queue): at least one, or exactly ``count``. Returns them. The
    ``AssertionError`` lists what IS enqueued there."""
    app = _app(task)
    found = enqueued(app, task, queue=queue, args=args, kwargs=kwargs)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    wanted = "at least 1" if count is None else f"exactly {count}"
    raise AssertionError(
        f"expected {wanted} {_call(task.name, args, kwargs)} enqueued, found {len(found)}; "
        + _listing(app, _queues(app, task, queue)))


def refute_enqueued(task: Task[Any, Any], *, args: Sequence[Any] | None = None,
                    kwargs: dict[str, Any] | None = None, queue: str | None = None) -> None:
    """Assert that no job of ``task`` with these ``args``/``kwargs`` waits on ``queue``
    (default: the task's queue); the ``AssertionError`` lists what IS enqueued."""
    app = _app(task)
    found = enqueued(app, task, queue=queue, args=args, kwargs=kwargs)
    if found:
        raise AssertionError(
            f"expected no {_call(task.name, args, kwargs)} enqueued, found {len(found)}; "
            + _listing(app, _queues(app, task, queue)))
