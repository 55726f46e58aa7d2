"""The transactional outbox: ``enqueue(db, task, *args)`` writes a job into the caller's
database transaction; ``relay`` (``echomq outbox relay --db URL``) admits each row once."""

from __future__ import annotations

from echomq.tasks.outbox import (
    TABLE,
    Db,
    Relayed,
    connect,
    enqueue,
    install,
    of,
    relay,
    relay_batch,
)

__all__ = ["TABLE", "Db", "Relayed", "connect", "enqueue", "install", "of", "relay",
           "relay_batch"]
