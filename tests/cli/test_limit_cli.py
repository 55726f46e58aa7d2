"""``echomq limit QUEUE N|none`` and the refusal of a pattern as a group name
(``echomq group rate Q 'tenant-*' 10/1s`` used to create a group literally named so)."""

from __future__ import annotations

from echomq.verbs import groups, jobs
from tests.support.cli import echomq


def test_limit_sets_and_removes_the_queue_cap(url, conn, queue):
    done = echomq("limit", queue, "3", url=url)
    assert done.returncode == 0, done.stderr
    assert "at most 3 active at once" in done.stdout
    assert jobs.queue_limit(conn, queue) == 3
    assert echomq("limit", queue, "none", url=url).returncode == 0
    assert jobs.queue_limit(conn, queue) is None
    bad = echomq("limit", queue, "0", url=url)
    assert bad.returncode == 2 and "never run a job" in bad.stderr


def test_a_group_pattern_is_refused_and_points_at_the_defaults(url, conn, queue):
    done = echomq("group", "rate", queue, "tenant-*", "10/1s", url=url)
    assert done.returncode != 0
    assert "group_rate" in done.stderr and "set_defaults" in done.stderr
    assert groups.stats(conn, queue) == {}  # nothing written


def test_batch_shows_a_batchs_progress(url, conn, queue):
    from echomq.verbs import batches
    from echomq.verbs.batches import Callback

    bid = "JOBbatchcli" + queue
    batches.create(conn, bid, {"complete": Callback(queue, "cb")})
    batches.enroll(conn, bid, ["JOB1", "JOB2"])
    batches.close(conn, bid)
    batches.settle(conn, bid, [("JOB1", "completed"), ("JOB2", "dead")])
    done = echomq("batch", bid, url=url)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 ended (100%), closed" in done.stdout
    assert "completed 1  dead 1" in done.stdout and "fired: complete" in done.stdout
    assert jobs.get(conn, queue, bid + ".complete") is not None  # the callback job
    assert echomq("batch", "JOBnone", url=url).returncode == 1


def test_group_weight_sets_a_groups_turns(url, conn, queue):
    jobs.enqueue(conn, queue, "JOBw" + queue, b"{}", group="acme")
    done = echomq("group", "weight", queue, "acme", "3", url=url)
    assert done.returncode == 0, done.stderr
    assert groups.stats(conn, queue)["acme"].weight == 3
    assert echomq("group", "weight", queue, "acme", "0", url=url).returncode == 2
