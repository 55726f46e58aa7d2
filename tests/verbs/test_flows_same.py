"""Flow nodes that share another node's end (``Node.same``), on a real Valkey (single server
and a 3-primary cluster): one job feeds several parents, its links are written after every
level (so a link above its job still finds it), they settle with its result or its death,
and a tree that names no such job is refused before anything is written."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from echomq import AsyncConnector
from echomq.core import ids, keyspace
from echomq.verbs import flows, jobs
from echomq.verbs.flows import Node
from tests.support.flows import leaf, state

pytestmark = pytest.mark.topologies


def qname() -> str:
    return "fs-" + uuid.uuid4().hex[:8]


def diamond(pq: str, mq: str, sq: str) -> tuple[Node, Node, Node]:
    """root <- [a <- [b <- [job]], c <- [link to job]]: the link sits a level above its job."""
    job = leaf(sq)
    link = Node(sq, ids.mint(), job.payload, same=job.id)
    b = Node(mq, ids.mint(), b"b", children=(job,))
    a = Node(mq, ids.mint(), b"a", children=(b,))
    c = Node(mq, ids.mint(), b"c", children=(link,))
    root = Node(pq, ids.mint(), b"root", children=(a, c))
    return root, job, link


def test_one_job_feeds_two_parents(conn, raw):
    pq, mq, sq = qname(), qname(), qname()
    root, job, link = diamond(pq, mq, sq)
    c = root.children[1]
    out = flows.admit(conn, root)
    assert out[job.id] == "enqueued"
    assert out[link.id] == "linked" and out.links == {link.id: job.id}
    assert state(raw, sq, link.id) == "linked"
    assert raw.zcard(keyspace.queue_key(sq, "pending")) == 1  # one job to run, not two
    claim = jobs.claim(conn, sq, 60_000)
    assert claim is not None and claim.id == job.id
    jobs.ack(conn, sq, job.id, claim.token, result=b'{"n":7}', keep_result_ms=60_000)
    while flows.carry(conn, sq).read:
        pass
    for parent in (root.children[0].children[0], c):
        (kid,) = flows.children(conn, mq, parent.id)
        assert kid.state == "completed" and kid.value == {"n": 7}
    assert state(raw, mq, c.id) == "pending"


def test_a_link_shares_a_death(conn, raw):
    pq, mq, sq = qname(), qname(), qname()
    root, job, _ = diamond(pq, mq, sq)
    c = root.children[1]
    flows.admit(conn, root)
    claim = jobs.claim(conn, sq, 60_000)
    assert claim is not None
    jobs.retry(conn, sq, job.id, claim.token, 0, 1, "boom")
    while flows.carry(conn, sq).read:
        pass
    assert state(raw, mq, c.id) == "dead"
    assert "boom" in raw.hget(keyspace.job_key(mq, c.id), "error").decode()


def test_a_tree_admitted_twice_writes_its_links_once(url, raw):
    pq, mq, sq = qname(), qname(), qname()
    root, job, link = diamond(pq, mq, sq)

    async def main() -> tuple[Any, Any]:
        aconn = await AsyncConnector.connect(url)
        try:
            return await flows.admit(aconn, root), await flows.admit(aconn, root)
        finally:
            await aconn.close()

    first, again = asyncio.run(main())
    assert first[link.id] == "linked" and again[link.id] == "duplicate"
    assert raw.lrange(keyspace.queue_key(sq, f"watch:{job.id}"), 0, -1) == [link.id.encode()]


@pytest.mark.parametrize("bad", ["unknown", "other queue", "has children", "to a link"])
def test_a_link_to_no_job_of_the_tree_is_refused(conn, raw, bad):
    pq, sq = qname(), qname()
    job = leaf(sq)
    target = {"unknown": ids.mint(), "other queue": job.id, "has children": job.id,
              "to a link": job.id}[bad]
    queue = pq if bad == "other queue" else sq
    kids = (leaf(sq),) if bad == "has children" else ()
    link = Node(queue, ids.mint(), b"x", children=kids, same=target)
    extra = (Node(sq, ids.mint(), b"x", same=link.id),) if bad == "to a link" else ()
    root = Node(pq, ids.mint(), b"root", children=(job, link, *extra))
    with pytest.raises(ValueError, match="shares the end of"):
        flows.admit(conn, root)
    assert state(raw, pq, root.id) is None and state(raw, sq, job.id) is None
