"""``inline``: inside the block, an enqueue runs its job at once, in the caller's test.

Every admission of the app (``task.enqueue`` and its ``a*``, ``enqueue_many``, a chain or
a flow) writes its job through the real scripts as usual; then, before the call returns,
the app's claimable jobs are drained (``testing.drain``: the worker's path, verdicts,
retries, callbacks, kept results), so the job has run, and the jobs it enqueued too, when
``enqueue`` returns its id. The block yields a ``Drained`` that adds up every run.

Caveats (as Oban's inline mode and Celery's eager mode have theirs, fewer of them):
- one attempt runs now; a retry waits on the schedule as in production (run it with
  ``testing.drain(app, with_scheduled=True)``), and so do ``enqueue_in``/``enqueue_at``;
- a failure is not raised into the caller: read ``.errors``, ``.dead`` of what the block
  yields (or use ``testing.perform`` to see the exception);
- the switch is the app's, for every thread while the block runs (a worker of the same
  app in this process would find the jobs already run), and it is not re-entrant: an
  enqueue from a job being drained is left to that drain, which takes it next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from echomq.testing import draining

if TYPE_CHECKING:
    from echomq.tasks.admission import Plan
    from echomq.tasks.app import App

T = TypeVar("T")

#: the app's methods an inline block stands in for (its instance attributes, removed after)
_HOOKS = ("submit", "asubmit")


class _Inline:
    """The stand-ins: each admission as the app makes it, then a drain of its queues."""

    def __init__(self, app: App, ran: draining.Drained) -> None:
        self.app, self.ran = app, ran
        self.busy = False
        self.cls = type(app)

    def queues(self, queues: Sequence[str]) -> list[str]:
        names = list(draining.served(self.app, None))
        return list(dict.fromkeys([*names, *queues]))

    def submit(self, plan: Plan[T]) -> T:
        got = self.cls.submit(self.app, plan)
        if not self.busy:
            self.busy = True
            try:
                self.ran.add(draining.drain(self.app, self.queues(plan.queues)))
            finally:
                self.busy = False
        return got

    async def asubmit(self, plan: Plan[T]) -> T:
        got = await self.cls.asubmit(self.app, plan)
        if not self.busy:
            self.busy = True
            try:
                self.ran.add(await draining.adrain(self.app, self.queues(plan.queues)))
            finally:
                self.busy = False
        return got


@contextlib.contextmanager
def inline(app: App) -> Iterator[draining.Drained]:
    """Run each job the app admits inside the block at once (see the module docstring);
    yields the ``Drained`` of every run."""
    if "submit" in vars(app):
        raise RuntimeError("testing.inline(app) is already on for this app")
    ran = draining.Drained()
    hooks = _Inline(app, ran)
    for name in _HOOKS:
        setattr(app, name, getattr(hooks, name))
    try:
        yield ran
    finally:
        for name in _HOOKS:
            vars(app).pop(name, None)
