"""Declaring: an app's registry of its tasks by name and its recurrences (dramatiq's
``registry`` idea).

``App`` holds a ``Registry`` (``app.registry``) and declares through it: ``@app.task`` makes a
``TaskDefaults`` and ``declare``s it, ``@app.every``/``@app.cron`` make a checked
``repeat.Definition`` and ``recur`` it. A recurrence is only recorded here: a worker
upserts it at start (``repeat.put``), its Pump fires it (HOST clock, or the server's).
Stacked in either order, a recurrence lives on its task's queue and fires its name. The
queries a worker needs (``queues``, ``served``, ``lease_for``, ``partitions_of``) read
the registry; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from echomq.core import codecs, rates
from echomq.core.payload import PLAIN, Format, decode, encode
from echomq.runtime.route import DEFAULT_LEASE_MS
from echomq.tasks.defaults import TaskDefaults, default_name
from echomq.tasks.producer import Producer
from echomq.tasks.task import Task
from echomq.verbs.repeat import Definition


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A recurring registration a worker upserts at start (the Pump fires it): the task it
    fires, the queue it lives on, its name and its checked definition, whose template is
    written the app's way (``fmt``: its serializer and codec, as a job's payload), so an
    occurrence the Pump mints from it decodes in the worker like any job."""

    task: str
    queue: str
    name: str
    spec: Definition
    fmt: Format = PLAIN

    def steady(self, stored: bytes | None) -> Definition:
        """The definition to upsert over a stored template: a coded template is sealed
        anew by each process (Fernet's IV and time), so a stored one that decodes to the
        same call is kept (the upsert then writes nothing); otherwise ``spec``."""
        mine = self.spec.template
        if stored is None or stored == mine or not codecs.sealed(mine):
            return self.spec
        try:
            same = decode(stored, self.fmt) == decode(mine, self.fmt)
        except ValueError:  # written with a key this app no longer has: rewritten
            same = False
        return self.spec.with_template(stored) if same else self.spec

    @property
    def every_ms(self) -> int | None:
        return self.spec.every_ms

    @property
    def cron(self) -> str | None:
        return self.spec.cron

    @property
    def tz(self) -> str | None:
        return self.spec.tz if self.spec.cron is not None else None

    @property
    def template(self) -> bytes | str:
        return self.spec.template


class Registry:
    """The tasks (by name) and recurrences of one app (``producer``)."""

    def __init__(self, producer: Producer, default_queue: str) -> None:
        self.producer = producer
        self.default_queue = default_queue
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.recurrences: list[Recurrence] = []
        self._on: dict[str, list[Task[Any, Any]]] | None = None  # ``on``'s index
        #: the tasks by their (logical) queue: ``check`` reads one queue's, not all
        self._named: dict[str, list[Task[Any, Any]]] = {}

    # -- declaring -----------------------------------------------------------------------

    def check(self, d: TaskDefaults) -> None:
        """Refuse what contradicts a task already declared on the same queue: another
        partition count, or another rate (a queue has one)."""
        mine = self._named.get(d.queue, [])
        for other in mine:
            if other.partitions != d.partitions:
                raise ValueError(f"queue {d.queue!r} has {other.partitions} partition(s) "
                                 f"(task {other.name}); every task on it must say the same")
        if d.rate is not None:
            for other in mine:
                if other.rate not in (None, d.rate):
                    raise ValueError(
                        f"queue {d.queue!r} already has rate {rates.show(other.rate)} (task "
                        f"{other.name}); a queue has one rate: declare the same on every "
                        "task, or on one")

    def declare(self, f: Callable[..., Any], d: TaskDefaults) -> Task[Any, Any]:
        """Register ``f`` (a function, or a task a recurrence registered with the
        defaults) as a task declared ``d``: the task."""
        inner = f if isinstance(f, Task) else None
        target = inner.fn if inner is not None else f
        if not callable(target):
            raise TypeError(f"@app.task decorates a function, not {type(target).__name__}")
        name = d.name or default_name(target)
        if not d.name and getattr(target, "__module__", None) == "__main__":
            warn_main(name)
        if name in self.tasks and self.tasks[name].fn is not target:
            raise ValueError(f"a task named {name!r} is already registered")
        t: Task[Any, Any] = Task(self.producer, target, d, name)
        if inner is not None and self.tasks.get(inner.name) is inner:
            # @app.task above @app.every/@app.cron: the recurrence below registered the
            # function with the defaults; it moves to this task's queue and name
            del self.tasks[inner.name]
            self._unindex(inner)
            self._moved(inner, t)
        if name in self.tasks:
            self._unindex(self.tasks[name])
        self.tasks[name] = t
        self._named.setdefault(t.queue, []).append(t)
        if self._on is not None:
            for q in t.queues:
                self._on.setdefault(q, []).append(t)
        return t

    def _unindex(self, t: Task[Any, Any]) -> None:
        named = self._named.get(t.queue, [])
        if t in named:
            named.remove(t)
        self._on = None  # rebuilt at the next ``on``

    def recur(self, spec: Definition, name: str | None, args: Iterable[Any],
              kwargs: dict[str, Any] | None) -> Callable[[Any], Task[Any, Any]]:
        """The decorator of ``@app.every``/``@app.cron``: records a recurrence of ``spec``
        (its template is the task's call with ``args``/``kwargs``) for the task it
        decorates (a plain function is declared with the defaults first)."""
        call = (tuple(args), dict(kwargs or {}))

        def register(t: Any) -> Task[Any, Any]:
            task = t if isinstance(t, Task) else self.declare(
                t, TaskDefaults.of(self.default_queue))
            self._add(task, name, spec.with_template(
                encode(task.name, *call, fmt=self.producer.format)))
            return task

        return register

    def _add(self, task: Task[Any, Any], name: str | None, spec: Definition) -> None:
        reg_name = name or task.name
        # a partitioned queue's recurrence lives on (and fires into) its first partition
        queue = task.queues[0]
        if any(r.queue == queue and r.name == reg_name for r in self.recurrences):
            raise ValueError(f"a recurrence named {reg_name!r} is already registered on "
                             f"{task.queue!r}; pass name=")
        self.recurrences.append(Recurrence(task.name, queue, reg_name, spec,
                                           self.producer.format))

    def _moved(self, old: Task[Any, Any], new: Task[Any, Any]) -> None:
        """Re-register ``old``'s recurrences for ``new`` (its queue, its name), keeping
        their names, arguments and definitions."""
        mine = [r for r in self.recurrences if r.task == old.name and r.queue == old.queues[0]]
        for r in mine:
            self.recurrences.remove(r)
        for r in mine:
            _, args, kwargs = decode(r.template, r.fmt)
            template = encode(new.name, args, kwargs, fmt=r.fmt)
            # a name the recurrence took from the old task follows the task's new name
            self._add(new, None if r.name == old.name else r.name,
                      r.spec.with_template(template))

    # -- what workers and callers read ---------------------------------------------------

    def named(self, task: str) -> Task[Any, Any]:
        """The task registered as ``task``; ``LookupError`` naming the known ones."""
        try:
            return self.tasks[task]
        except KeyError:
            raise LookupError(
                f"no task named {task!r}; known: {', '.join(sorted(self.tasks)) or 'none'}"
            ) from None

    def queues(self) -> list[str]:
        """Every queue a task lives on (declaration order; a partitioned queue as its
        partitions, ``mail#0`` ...)."""
        return list(dict.fromkeys(q for t in self.tasks.values() for q in t.queues))

    def partitions_of(self, queue: str) -> int:
        """How many partitions ``queue`` has: a task's on it, else 1."""
        return next((t.partitions for t in self.tasks.values() if t.queue == queue), 1)

    def expand(self, queues: Iterable[str]) -> list[str]:
        """Queue names with each partitioned queue (``mail``) replaced by its partitions
        (``mail#0`` ...); other names as given."""
        split = {t.queue: t.queues for t in self.tasks.values()}
        return list(dict.fromkeys(p for q in queues for p in split.get(q, [q])))

    def served(self, queues: Iterable[str]) -> dict[str, list[str]]:
        """What a worker serving ``queues`` consumes: each name (a partitioned queue by its
        logical name, ``mail``) with the queues it stands for (``mail#0`` ...; any other
        name stands for itself), in order, each queue once."""
        split = {t.queue: t.queues for t in self.tasks.values()}
        out: dict[str, list[str]] = {}
        seen: set[str] = set()
        for q in queues:
            parts = [p for p in split.get(q, [q]) if p not in seen]
            if parts:
                out.setdefault(q, []).extend(parts)
                seen.update(parts)
        return out

    def on(self, queue: str) -> list[Task[Any, Any]]:
        """The tasks that run on ``queue`` (a partition counts as its task's queue), from
        an index built once per set of declarations: a worker on 1,000 queues asks for each
        of them, and a scan per queue would cost queues x tasks."""
        if self._on is None:  # built at the first ask, dropped when a task leaves
            index: dict[str, list[Task[Any, Any]]] = {}
            for t in self.tasks.values():
                for q in t.queues:
                    index.setdefault(q, []).append(t)
            self._on = index
        return self._on.get(queue, [])

    def lease_for(self, queue: str) -> int:
        """The claim lease for ``queue``: the shortest task lease on it, so a short-lease
        task is reaped on time if its worker dies before the first checkpoint."""
        leases = [t.lease_ms for t in self.on(queue)]
        return min(leases) if leases else DEFAULT_LEASE_MS


def warn_main(name: str) -> None:
    """Warn that a task declared in a script run as ``__main__`` has two names: ``send``
    here, ``mine.send`` in a worker that imports the file (its jobs would die there as an
    unknown task)."""
    import sys
    import warnings
    from pathlib import Path

    path = getattr(sys.modules.get("__main__"), "__file__", None)
    module = Path(path).stem if path else "yourmodule"
    warnings.warn(
        f"task {name!r} is declared in __main__ (a script run directly): this process "
        f"names it {name!r}, a worker that imports the file names it "
        f"'{module}.{name}', and its jobs die there as an unknown task; define it in a "
        f"module and import it (or give it a name: @app.task(name={name!r}))",
        UserWarning, stacklevel=4)
