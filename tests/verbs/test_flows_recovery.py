"""Flow admission that never commits, and completions carried without a Pump, on a real
Valkey (single server and a 3-primary cluster): a client that dies between levels (a
SIGKILLed process) leaves a root that the beat's carry leg rolls back past its deadline; a
whole tree admitted but not committed is left to run; a slow client learns its flow was
rolled back; a worker with ``pump=False`` (a Metronome, or lone consumers) carries
completions and releases parents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from echomq.connectors.connector import Connector
from echomq.core import errors, keyspace, steps
from echomq.tasks.app import App
from echomq.tasks.canvas import group
from echomq.verbs import flows, jobs
from tests.support.clients import client_for
from tests.support.flows import pausing, spread_queues, state, tree
from tests.support.paths import ROOT
from tests.support.polling import wait_for
from tests.support.workers import serving


class Died(Exception):
    """The admitting client 'dies' (stops sending) here."""


def die() -> None:
    raise Died


def qnames(n: int) -> list[str]:
    return ["fr-" + uuid.uuid4().hex[:8] for _ in range(n)]



def cut_short(conn: Any, root: flows.Node, levels: int, grace_ms: int) -> None:
    with pytest.raises(Died):
        steps.drive(conn, pausing(flows.admit.steps(root, grace_ms), levels, die))


@pytest.mark.slow
@pytest.mark.topologies
@pytest.mark.parametrize("levels", [1, 2])
def test_a_root_left_uncommitted_is_rolled_back_past_its_deadline(conn, raw, levels):
    rq, mq, lq = qs = qnames(3)
    root = tree(qs, 3)
    cut_short(conn, root, levels, 300)
    assert state(raw, rq, root.id) == "waiting-children"
    assert flows.turn(conn, rq, "me", 1000) == flows.Turn(True, 0, ())  # not yet due
    assert flows.turn(conn, rq, "other", 1000).held is False  # one carrier at a time
    time.sleep(0.35)
    got = flows.turn(conn, rq, "me", 1000)
    assert got.stale == (root.id,)
    assert flows.turn(conn, rq, "me", 1000).stale == ()  # handed out once at a time
    assert flows.roll_back(conn, rq, root.id) == "cancelled"
    row = raw.hmget(keyspace.job_key(rq, root.id), "state", "error")
    assert row[0] == b"cancelled" and b"not committed by its deadline" in row[1]
    mids = [m.id for m in root.children]
    want = "cancelled" if levels == 2 else None  # written, waiting: cancelled with it
    assert [state(raw, mq, m) for m in mids] == [want, want]
    assert not any(state(raw, lq, n.id) for m in root.children for n in m.children)
    for q in qs:
        assert raw.zcard(keyspace.queue_key(q, "waiting-children")) == 0
    assert raw.zcard(keyspace.queue_key(rq, "flows:open")) == 0


@pytest.mark.topologies
def test_a_whole_tree_left_uncommitted_runs_and_is_not_rolled_back(conn, raw):
    rq, mq, lq = qs = qnames(3)
    root = tree(qs, 2)
    cut_short(conn, root, 3, 200)  # every level written, the commit never sent
    for q in (lq, mq):
        while (c := jobs.claim(conn, q, 60_000)) is not None:
            jobs.ack(conn, q, c.id, c.token, keep=False)
        flows.carry(conn, q)
    assert state(raw, rq, root.id) == "pending"
    time.sleep(0.25)
    assert flows.turn(conn, rq, "me", 1000).stale == ()
    assert raw.zcard(keyspace.queue_key(rq, "flows:open")) == 0
    assert state(raw, rq, root.id) == "pending"


@pytest.mark.topologies
def test_a_re_admission_before_the_deadline_completes_and_commits(conn, raw):
    rq, _, lq = qs = qnames(3)
    root = tree(qs, 2)
    cut_short(conn, root, 1, 300)
    out = flows.admit(conn, root)  # the same ids: only what is missing is written
    assert out[root.id] == "duplicate"
    assert sorted(set(out.values())) == ["duplicate", "enqueued", "waiting"]
    assert raw.zcard(keyspace.queue_key(rq, "flows:open")) == 0
    time.sleep(0.35)
    assert flows.turn(conn, rq, "me", 1000).stale == ()
    assert raw.zcard(keyspace.queue_key(lq, "pending")) == 4


@pytest.mark.topologies
def test_a_client_slower_than_its_deadline_learns_its_flow_was_rolled_back(conn, raw, url):
    rq, _, lq = qs = qnames(3)
    root = tree(qs, 2)
    other = Connector.connect(url)

    def stall() -> None:  # meanwhile, a carrier rolls the flow back
        time.sleep(0.25)
        for s in flows.turn(other, rq, "carrier", 1000).stale:
            flows.roll_back(other, rq, s)

    with pytest.raises(errors.StateError, match="rolled back"):
        steps.drive(conn, pausing(flows.admit.steps(root, 200), 1, stall))
    other.close()
    assert state(raw, rq, root.id) == "cancelled"
    # the leaves it wrote late still end, and never release the cancelled root
    for q in (lq, qs[1]):
        while (c := jobs.claim(conn, q, 60_000)) is not None:
            jobs.ack(conn, q, c.id, c.token, keep=False)
        flows.carry(conn, q)
    assert state(raw, rq, root.id) == "cancelled"


def urls_and_queues(request: pytest.FixtureRequest, topology: str) -> tuple[str, list[str]]:
    if topology == "single":
        return request.getfixturevalue("server").url, qnames(3)
    return (cl := request.getfixturevalue("cluster")).url, spread_queues(cl, 3, "fr-")


@pytest.mark.slow
@pytest.mark.parametrize(("topology", "metronome"),
                         [("single", True), ("single", False), ("cluster", True)])
def test_a_sigkilled_admission_is_rolled_back_by_a_worker_without_a_pump(
        request, topology, metronome):
    url, qs = urls_and_queues(request, topology)
    rq, mq, lq = qs
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # so ``-m tests.support.flows`` resolves
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.flows", url, *qs, "2", "800"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # two levels written: root and its middle nodes
        written = json.loads(line)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    raw = client_for(url)
    assert state(raw, rq, written["root"]) == "waiting-children"
    assert [state(raw, mq, m) for m in written["mids"]] == ["waiting-children"] * 2
    app = App(url)
    with serving(app, qs, pump=False, metronome=metronome):
        wait_for(lambda: state(raw, rq, written["root"]) == "cancelled", 10,
                 "the cut admission rolled back")
        wait_for(lambda: [state(raw, mq, m) for m in written["mids"]] == ["cancelled"] * 2,
                 5, "its written subtree cancelled")
    assert not any(state(raw, lq, n) for n in written["leaves"])
    for q in qs:
        assert raw.zcard(keyspace.queue_key(q, "waiting-children")) == 0
    assert raw.zcard(keyspace.queue_key(rq, "flows:open")) == 0
    raw.close()


@pytest.mark.parametrize(("topology", "metronome"),
                         [("single", True), ("single", False), ("cluster", False)])
def test_a_worker_without_a_pump_releases_flow_parents(request, topology, metronome):
    url, (qr, _, ql) = urls_and_queues(request, topology)
    app = App(url)

    @app.task(queue=ql)
    def square(n: int) -> int:
        return n * n

    @app.task(queue=qr, keep_result=60)
    def total(values: list[int]) -> int:
        return sum(values)

    with serving(app, [qr, ql], pump=False, metronome=metronome) as worker:
        assert worker.pump is None
        root = group(*(square.s(n) for n in range(20))).then(total.s()).enqueue()
        assert app.result(root, timeout=20) == sum(n * n for n in range(20))
