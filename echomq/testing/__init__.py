"""The testing kit: test your tasks on the real transitions, in the test process.

What passes here runs in production: every helper drives the same Lua (or native)
transitions a worker does, on a real server (the pytest plugin's ephemeral embedded one),
at in-process speed. Nothing is mocked and no clock is patched.

- ``drain(app, queues=None, *, with_scheduled=False, with_recurrences=False,
  limit=10_000) -> Drained``: run the claimable jobs through the worker's own path,
  recursively (``adrain`` awaits the same on the test's loop);
- ``enqueued``, ``assert_enqueued``, ``refute_enqueued``: what waits, matched after the
  payload's JSON round trip;
- ``perform(task, *args, **kwargs)``: one call as a worker makes it, nothing written;
- ``advance(app, delta)``: time travel (what is due within ``delta`` is due now);
- ``inline(app)``: inside the block, an enqueue runs its job at once;
- ``flush(app)``: an empty keyspace on a test server (unittest's ``setUp``).

The pytest fixtures ``echomq_url`` and ``echomq_app`` are in ``echomq.testing.plugin``
(loaded by pytest through the package's ``pytest11`` entry point). The guide: Testing your
tasks (docs/guide/testing.md).
"""

from __future__ import annotations

from echomq.testing.clock import advance
from echomq.testing.draining import Drained, adrain, drain
from echomq.testing.inline import inline
from echomq.testing.perform import perform
from echomq.testing.reads import assert_enqueued, enqueued, refute_enqueued
from echomq.testing.wipe import flush

__all__ = [
    "Drained",
    "adrain",
    "advance",
    "assert_enqueued",
    "drain",
    "enqueued",
    "flush",
    "inline",
    "perform",
    "refute_enqueued",
]
