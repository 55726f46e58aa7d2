"""The group commands as a user runs them (``echomq`` subprocesses): ``group list``,
``group pause|resume|limit|rate``, ``rate`` and the group lines of ``stats``; refusals in
plain words that write nothing."""

from __future__ import annotations

import argparse
import json

import pytest

from echomq.cli.group import parse_limit, parse_rate
from echomq.core import ids
from echomq.verbs import groups, jobs, registry
from tests.support.cli import echomq


def put(conn, queue: str, group: str, n: int = 1) -> list[str]:
    out = []
    for _ in range(n):
        jid = ids.mint()
        jobs.enqueue(conn, queue, jid, b"{}", group=group)
        out.append(jid)
    return out


def test_rates_parse_as_max_per_window():
    assert parse_rate("10/1s") == (10, 1000)
    assert parse_rate("10/s") == (10, 1000)
    assert parse_rate("600/1m") == (600, 60_000)
    assert parse_rate(" 5 / 250ms ") == (5, 250)
    assert parse_rate("none") is None
    for bad, words in (("10/5", "needs a unit"), ("10", "not a rate"), ("1/-2s", "is negative")):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            parse_rate(bad)
    assert parse_limit("3") == 3 and parse_limit("none") is None
    with pytest.raises(argparse.ArgumentTypeError, match="not a limit"):
        parse_limit("lots")


@pytest.mark.slow
def test_group_controls_round_trip_through_the_cli(conn, url, queue):
    put(conn, queue, "acme", 3)
    put(conn, queue, "globex", 1)

    done = echomq("group", "limit", queue, "acme", "2", url=url)
    assert done.returncode == 0, done.stderr
    assert "at most 2 at once" in done.stdout
    done = echomq("group", "rate", queue, "acme", "10/1s", url=url)
    assert done.returncode == 0, done.stderr
    done = echomq("group", "pause", queue, "globex", url=url)
    assert done.returncode == 0, done.stderr
    done = echomq("group", "weight", queue, "acme", "3", url=url)
    assert done.returncode == 0, done.stderr

    stats = groups.stats(conn, queue)
    assert stats["acme"].limit == 2 and stats["acme"].waiting == 3
    assert stats["globex"].paused

    listed = echomq("group", "list", "--queue", queue, url=url)
    assert listed.returncode == 0, listed.stderr
    rows = {ln.split()[1]: ln.split() for ln in listed.stdout.splitlines()[1:]}
    # queue group waiting active limit rate weight paused
    assert rows["acme"][2:] == ["3", "0", "2", "10/1s", "3", "no"]
    assert rows["globex"][2:] == ["1", "0", "-", "-", "1", "yes"]

    as_json = json.loads(echomq("group", "list", "--queue", queue, "--json", url=url).stdout)
    mine = {r["group"]: r for r in as_json}
    assert mine["acme"]["rate"] == "10/1s" and mine["globex"]["paused"] is True
    assert mine["acme"]["weight"] == 3 and mine["globex"]["weight"] == 1

    assert echomq("group", "resume", queue, "globex", url=url).returncode == 0
    assert echomq("group", "limit", queue, "acme", "none", url=url).returncode == 0
    assert echomq("group", "rate", queue, "acme", "none", url=url).returncode == 0
    stats = groups.stats(conn, queue)
    assert stats["acme"].limit is None and not stats["globex"].paused
    assert stats["acme"].rate_max is None

    # stats: the grouped jobs are counted where they wait (the lanes), not in pending
    done = echomq("stats", "--queue", queue, url=url)
    assert done.returncode == 0, done.stderr
    assert f"{queue}: 2 groups, 4 waiting in their lanes, 0 active, 0 paused" in done.stdout
    table = json.loads(echomq("stats", "--queue", queue, "--json", url=url).stdout)
    assert table[queue]["groups"] == {"groups": 2, "waiting": 4, "active": 0, "paused": 0}


@pytest.mark.slow
def test_queue_rate_set_and_clear(conn, url, queue, raw):
    registry.add(conn, [queue])  # a queue some producer used (an unknown name is refused)
    done = echomq("rate", queue, "100/1m", url=url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"queue {queue}: rate 100/1m"
    # the queue's rate is the wire's hash (max, ms): what every claim script reads
    assert raw.hgetall(f"emq:{{{queue}}}:rate") == {b"max": b"100", b"ms": b"60000"}
    assert echomq("rate", queue, "none", url=url).returncode == 0
    assert not raw.exists(f"emq:{{{queue}}}:rate")


@pytest.mark.parametrize("argv, words", [
    (["group", "limit", "Q", "acme", "0"], "would never run a job"),
    (["group", "rate", "Q", "acme", "10"], "not a rate"),
    (["group", "rate", "Q", "acme", "0/1s"], "MAX must be at least 1"),
    (["rate", "Q", "ten/1s"], "not a rate"),
    (["group", "pause", "Q", "a{b}"], "group"),
])
@pytest.mark.slow
def test_bad_arguments_are_refused_in_words_and_write_nothing(argv, words, url, queue,
                                                              snap):
    argv = [queue if a == "Q" else a for a in argv]
    before = snap(queue)
    done = echomq(*argv, url=url)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert snap(queue) == before


def test_list_without_groups_says_so(url, queue):
    done = echomq("group", "list", "--queue", queue, url=url)
    assert done.returncode == 0
    assert done.stdout.strip() == f"(no groups on queue {queue!r})"
