"""What an app declares, as data: per queue its task names, and each task's options.

The worker registers the names per queue (the live worker registry, ``verbs.workers``)
and records the options per queue (``verbs.declarations``), so the CLI can refuse a task
name no app declares and a dashboard can show how each task runs. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.task import Task


def tasks_by_queue(app: App, queues: Sequence[str]) -> dict[str, list[str]]:
    """The names of ``app``'s tasks on each of ``queues`` (a partition counts as its
    task's queue), sorted; a queue none of its tasks uses maps to ``[]``."""
    out: dict[str, list[str]] = {q: [] for q in queues}
    for task in app.tasks.values():
        for q in task.queues:
            if q in out:
                out[q].append(task.name)
    return {q: sorted(names) for q, names in out.items()}


def options(app: App, task: Task[Any, Any]) -> dict[str, Any]:
    """How ``task`` runs, as JSON-able data: its queue (and partitions), retries and
    backoff, lease, timeout, kept result, group, isolation, and its recurrences."""
    group = (task.group if isinstance(task.group, str | None)
             else f"by {getattr(task.group, '__qualname__', 'a function')}(...)")
    out: dict[str, Any] = {
        "queue": task.queue, "partitions": task.partitions,
        "max_attempts": task.max_attempts,
        "backoff": task.backoff,
        "retry_delay_ms": task.retry_delay_ms, "lease_ms": task.lease_ms,
        "timeout_ms": task.timeout_ms, "keep_result_ms": task.keep_result_ms,
        "group": group, "isolation": task.isolation,
    }
    out.update(_failure_options(task))
    recurrences = [{"name": r.name, "every_ms": r.every_ms, "cron": r.cron, "tz": r.tz}
                   for r in app.recurrences if r.task == task.name]
    if recurrences:
        out["recurrences"] = recurrences
    return out


def _failure_options(task: Task[Any, Any]) -> dict[str, Any]:
    """Which errors retry (``retry_on``/``dont_retry_on``, by class name) and the
    deadline (``expires``: ms after admission, or an instant), where the task sets them."""
    out: dict[str, Any] = {}
    for key in ("retry_on", "dont_retry_on"):
        classes = getattr(task, key, None)
        if classes:
            classes = classes if isinstance(classes, tuple) else (classes,)
            out[key] = [c.__name__ for c in classes]
    deadline = getattr(task, "expires", None)
    if deadline is not None:
        out["expires_ms" if deadline.mode == "in" else "expires_at_ms"] = deadline.value
    return out


def declared_on(app: App, queue: str) -> dict[str, dict[str, Any]]:
    """``options`` of every task of ``app`` on ``queue``, by name."""
    return {t.name: options(app, t) for t in app.registry.on(queue)}


def app_name(app: App) -> str:
    """A readable name for ``app`` when none was given (``echomq worker`` passes its
    ``module:attribute``): ``<module of its first task>:app``, else ``app``."""
    for task in app.tasks.values():
        module = getattr(task.fn, "__module__", None)
        if module:
            return f"{module}:app"
    return "app"
