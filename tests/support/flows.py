"""Shared by the flow tests: queue names whose slots sit on different cluster shards."""

from __future__ import annotations

import uuid
from typing import Any

from echomq.core import keyspace


def spread_queues(cluster: Any, n: int, prefix: str = "fx-") -> list[str]:
    """``n`` fresh queue names whose slots live on ``n`` different primaries
    (``LocalCluster.owner``), so a flow over them crosses shards."""
    out: list[str] = []
    owners: set[int] = set()
    while len(out) < n:
        q = prefix + uuid.uuid4().hex[:8]
        port = cluster.owner(keyspace.queue_key(q, "pending")).port
        if port not in owners:
            owners.add(port)
            out.append(q)
    return out


def leaf(queue: str, **kw: Any) -> Any:
    """A flow leaf in ``queue`` with a fresh id and a small payload."""
    from echomq.core import ids
    from echomq.verbs.flows import Node

    return Node(queue, ids.mint(), b'{"n":1}', **kw)


def state(raw: Any, queue: str, jid: str) -> str | None:
    """The row's ``state`` (``None`` when there is no row)."""
    s = raw.hget(keyspace.job_key(queue, jid), "state")
    return s.decode() if s is not None else None


def pausing(gen: Any, after: int, pause: Any) -> Any:
    """Drive verb generator ``gen`` step by step, calling ``pause()`` once its ``after``-th
    reply came back (a test's way to stop a client between the levels of an admission)."""
    step = next(gen)
    n = 0
    while True:
        reply = yield step
        n += 1
        if n == after:
            pause()
        try:
            step = gen.send(reply)
        except StopIteration as stop:
            return stop.value


def tree(queues: list[str], width: int, payload: bytes = b'{"n":1}') -> Any:
    """A flow over ``queues`` (root, middle, leaves): a root with 2 middle nodes of
    ``width`` leaves each, fresh ids."""
    from echomq.core import ids
    from echomq.verbs.flows import Node

    rq, mq, lq = queues
    mids = tuple(Node(mq, ids.mint(), payload,
                      children=tuple(Node(lq, ids.mint(), payload) for _ in range(width)))
                 for _ in range(2))
    return Node(rq, ids.mint(), payload, children=mids)


def main(argv: list[str]) -> None:
    """``python -m tests.support.flows URL RQ MQ LQ LEVELS GRACE_MS``: admit a depth-2 tree,
    print its ids (JSON) once ``LEVELS`` levels are written, then hang (the test SIGKILLs
    this process there: a client dead between levels)."""
    import json
    import time

    from echomq.connectors.connector import Connector
    from echomq.core import steps
    from echomq.verbs import flows

    url, rq, mq, lq, levels, grace = argv
    root = tree([rq, mq, lq], 3)
    conn = Connector.connect(url)

    def pause() -> None:
        print(json.dumps({"root": root.id, "mids": [m.id for m in root.children],
                          "leaves": [n.id for m in root.children for n in m.children]}),
              flush=True)
        time.sleep(600)

    steps.drive(conn, pausing(flows.admit.steps(root, int(grace)), int(levels), pause))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
