"""``task.enqueue_on_commit``: a job sent when the caller's database transaction commits.

Mint now, send later: the job id is minted and the arguments encoded at the call (a bad
argument fails inside the caller's transaction, and the caller gets the id at once);
the admission is sent after the commit, and never when the transaction rolls back.

Which transaction:

- an SQLAlchemy ``Session`` given as the ``session=`` keyword (consumed, not passed to
  the task) or bound with ``with on_commit.session(s):``: sent from the session's
  ``after_commit`` event; a rollback drops what was asked inside the transaction or
  savepoint it rolls back (``after_soft_rollback``);
- otherwise, with Django configured: ``django.db.transaction.on_commit`` (dropped on the
  rollback of the atomic block or its savepoint; at once outside one). Django's
  ``TestCase`` never commits: use ``captureOnCommitCallbacks(execute=True)``;
- otherwise: sent at once.

The gap this leaves: a process that dies between the commit and the send loses the job
(the callbacks live in memory). ``echomq.outbox`` closes it.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable, Iterator
from typing import Any

_SESSION: contextvars.ContextVar[Any] = contextvars.ContextVar("echomq_session", default=None)
_PENDING = "echomq.on_commit"


@contextlib.contextmanager
def session(s: Any) -> Iterator[Any]:
    """Send ``enqueue_on_commit`` calls made inside this block when ``s`` (an SQLAlchemy
    ``Session``) commits."""
    token = _SESSION.set(s)
    try:
        yield s
    finally:
        _SESSION.reset(token)


def _is_session(value: Any) -> bool:
    orm = sys.modules.get("sqlalchemy.orm")
    return orm is not None and isinstance(value, orm.Session)


def take_session(kwargs: dict[str, Any]) -> Any:
    """The SQLAlchemy session of a call: a ``session=`` keyword holding one (removed from
    ``kwargs``), else the one bound by ``session(...)``, else ``None``."""
    if _is_session(kwargs.get("session")):
        return kwargs.pop("session")
    return _SESSION.get()


def defer(send: Callable[[], Any], sqla: Any = None) -> None:
    """Run ``send`` when the surrounding transaction commits (see the module doc)."""
    if sqla is not None:
        _after_commit(sqla, send)
        return
    if _django_ready():
        from django.db import transaction  # type: ignore[import-untyped]

        transaction.on_commit(send)
        return
    send()


def _django_ready() -> bool:
    if "django" not in sys.modules:
        return False
    from django.conf import settings  # type: ignore[import-untyped]

    return bool(settings.configured)


def _after_commit(sqla: Any, send: Callable[[], Any]) -> None:
    from sqlalchemy import event

    # (the transaction it was asked in, the send): a rolled-back savepoint drops its own
    pending: list[tuple[Any, Callable[[], Any]]] | None = sqla.info.get(_PENDING)
    if pending is None:
        pending = sqla.info[_PENDING] = []

        def committed(s: Any) -> None:
            if s.get_nested_transaction() is not None:  # a savepoint released: not yet
                return
            todo, s.info[_PENDING] = list(s.info[_PENDING]), []
            for _, fn in todo:
                fn()

        def rolled_back(s: Any, previous: Any) -> None:
            s.info[_PENDING] = [(t, fn) for t, fn in s.info[_PENDING]
                                if not _within(t, previous)]

        event.listen(sqla, "after_commit", committed)
        event.listen(sqla, "after_soft_rollback", rolled_back)
    txn = sqla.get_nested_transaction() or sqla.get_transaction()
    pending.append((txn, send))


def _within(txn: Any, ended: Any) -> bool:
    """Whether ``txn`` is ``ended`` or nested in it (a savepoint of it)."""
    while txn is not None:
        if txn is ended:
            return True
        txn = txn.parent
    return False
