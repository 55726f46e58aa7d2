"""``task.enqueue_on_commit``'s session binding: ``with on_commit.session(s):`` sends the
calls made inside when the SQLAlchemy session ``s`` commits."""

from __future__ import annotations

from echomq.tasks.oncommit import defer, session, take_session

__all__ = ["defer", "session", "take_session"]
