"""Guarded queue names: a command that acts on a queue (``pause``, ``resume``, ``rate``,
``purge``, ``stats --queue``, ``worker --queues``) refuses a name nothing has used, so a
typo during an incident (``echomq pause paymnets``) is not a silent success.

A queue is known when the queue registry holds it (a producer through an App, the CLI's
enqueue or a worker's start wrote it: ``verbs.registry``), the app given declares it, or
a stored job's sorted set carries it (the scan ``verbs.discovery`` runs, only when the
cheaper registry read misses). A partition (``mail#3``) counts as its queue and the queue
as its partitions. ``--force`` goes on with an unknown name. No clock.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import Any


class UnknownQueue(LookupError):
    """A queue name nothing has used (the CLI exits 2 with the message)."""


def force_flag(p: argparse.ArgumentParser) -> None:
    """``--force``: act on a queue name nothing has used yet."""
    p.add_argument("--force", action="store_true",
                   help="act on the queue even when no producer, worker, registration or "
                        "stored job has used its name (a typo is refused without it)")


def _covered(name: str, known: set[str]) -> bool:
    base = name.split("#", 1)[0]
    return name in known or base in known or any(k.split("#", 1)[0] == name for k in known)


def unknown(conn: Any, queues: Iterable[str], declared: Iterable[str] = ()) -> list[str]:
    """The names of ``queues`` nothing has used: the registry (and ``declared``) first in
    one round trip, the keyspace scan only for the names it misses."""
    from echomq.cli.common import scan_queues
    from echomq.verbs import registry

    wanted = list(dict.fromkeys(queues))
    known = set(registry.queues(conn, scan=False, declared=list(declared)))
    missing = [q for q in wanted if not _covered(q, known)]
    if not missing:
        return []
    known |= set(scan_queues(conn, progress=False))
    return [q for q in missing if not _covered(q, known)]


def check(conn: Any, queues: Iterable[str], *, force: bool = False,
          declared: Iterable[str] = ()) -> None:
    """Raise ``UnknownQueue`` naming the first unknown name of ``queues`` and the closest
    known one, unless ``force``."""
    if force:
        return
    from echomq.cli.common import scan_queues
    from echomq.core import keyspace
    from echomq.verbs import registry

    declared = list(declared)
    missing = unknown(conn, [keyspace.validate_queue(q) for q in queues], declared)
    if not missing:
        return
    names = sorted({q.split("#", 1)[0] for q in
                    registry.queues(conn, scan=False, declared=declared)
                    + scan_queues(conn, progress=False)})
    lines = []
    for name in missing:
        # the closest known name, however far: the line always offers one to compare
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
        lines.append(f"no queue named {name!r} is known (no producer, worker, registration "
                     "or stored job has used it); "
                     + (f"did you mean {close[0]!r}?" if close else
                        "did you mean another name? none is known yet"))
    raise UnknownQueue("\n".join(lines) + "\nnothing was done (--force acts on the name "
                       "anyway; `echomq stats` lists the known queues)")
