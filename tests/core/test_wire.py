"""The wire layer without a server: keyspace, ids, backoff, scripts."""

from __future__ import annotations

import doctest
import re
import threading

import pytest

from echomq import scripts
from echomq.core import backoff, ids, keyspace
from tests.support.paths import ROOT


def test_keys_share_one_hash_tag():
    assert keyspace.job_key("mail", "JOB1") == "emq:{mail}:job:JOB1"
    assert keyspace.queue_key("mail", "schedule") == "emq:{mail}:schedule"
    assert keyspace.queue_key("mail", "") == "emq:{mail}:"
    assert keyspace.lane_key("mail", "acme") == "emq:{mail}:g:acme:pending"
    assert keyspace.repeat_key("mail", "daily") == "emq:{mail}:repeat:daily"


@pytest.mark.parametrize(("bad", "exc"), [("", ValueError), ("a{b", ValueError),
                                          ("a}b", ValueError), ("é" * 101, ValueError),
                                          (None, TypeError), (b"q", TypeError)])
def test_queue_names_are_validated(bad, exc):
    with pytest.raises(exc):
        keyspace.queue_key(bad, "pending")


def test_queue_name_at_the_limit_is_accepted():
    assert keyspace.base("q" * 200).startswith("emq:{")


def test_mint_shape_and_order():
    minted = [ids.mint() for _ in range(20_000)]
    assert all(len(i) == 29 and i.startswith("JOB") for i in minted)
    assert all(ids.is_job_id(i) for i in minted)
    assert minted == sorted(minted)  # byte order = mint order, within a millisecond too
    assert len(set(minted)) == len(minted)
    stamps = [ids.timestamp_ms(i) for i in minted]
    assert stamps == sorted(stamps)


def test_mint_is_monotonic_across_threads():
    out: list[list[str]] = [[] for _ in range(4)]

    def work(slot: list[str]) -> None:
        slot.extend(ids.mint() for _ in range(2_000))

    threads = [threading.Thread(target=work, args=(o,)) for o in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for slot in out:
        assert slot == sorted(slot)
    assert len({i for slot in out for i in slot}) == 8_000


def test_parse_round_trip_and_errors():
    jid = ids.mint_at(1_700_000_000_123)
    assert ids.timestamp_ms(jid) == 1_700_000_000_123
    for bad in ["", "JOB", "TSK" + jid[3:], jid[:-1], jid[:-1] + "U", jid.lower()]:
        with pytest.raises(ValueError):
            ids.parse(bad)


def test_backoff_doctests_run():
    result = doctest.testmod(backoff)
    assert result.attempted >= 5 and result.failed == 0


def test_backoff_curves():
    assert [backoff.delay_ms(("fixed", 1000), n) for n in range(1, 5)] == [1000] * 4
    assert [backoff.delay_ms(("exponential", 100, 1000), n) for n in range(1, 7)] == [
        100, 200, 400, 800, 1000, 1000
    ]
    assert backoff.delay_ms(("exponential", 1, 10), 10**6) == 10
    draws = {backoff.delay_ms(("jitter", ("fixed", 3)), 1) for _ in range(400)}
    assert draws == {0, 1, 2, 3}
    assert backoff.delay_ms(("jitter", ("fixed", 0)), 1) == 0


@pytest.mark.parametrize("policy", [("fixed", -1), ("exponential", 0, 10), ("exponential", 1, 0),
                                    ("linear", 1), ("jitter", ("nope",)), ("fixed", 1.5), "fixed"])
def test_backoff_refuses_bad_policies(policy):
    with pytest.raises((ValueError, TypeError)):
        backoff.delay_ms(policy, 1)


@pytest.mark.parametrize("attempts", [0, -1, 1.0, True])
def test_backoff_refuses_bad_attempts(attempts):
    with pytest.raises(ValueError):
        backoff.delay_ms(("fixed", 1), attempts)


def test_every_script_documents_its_keys_and_argv():
    assert {"enqueue", "schedule", "promote", "claim", "ack", "retry", "delay", "reap",
            "extend", "register", "advance"} <= set(scripts.names())
    for name in scripts.names():
        s = scripts.get(name)
        header = s.source.split("\n", 1)[0]
        assert header.startswith(f"-- the @{name} script"), name
        used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", s.source)}
        assert used == set(range(1, s.numkeys + 1)), name
        documented = set(re.findall(r"^-- .*?(KEYS\[\d+\])", s.source, re.M))
        assert len(documented) >= 1, name
        assert "--@include" not in s.source
        assert re.fullmatch(r"[0-9a-f]{40}", s.sha)


def test_schedule_script_is_the_seeds_shape():
    src = scripts.source("schedule")
    assert "KEYS[1] = the job row, KEYS[2] = the schedule set" in src
    assert "'EMQKIND job id must be JOB-namespaced'" in src
    assert "redis.call('TIME')" in src


def test_unknown_script_name():
    with pytest.raises(KeyError):
        scripts.source("nope")


def test_docs_scripts_table_is_the_generated_one():

    from echomq import scripts

    readme = (ROOT / "docs" / "reference" / "scripts.md").read_text()
    block = readme.split("<!-- scripts-table:begin -->\n", 1)[1]
    block = block.split("\n<!-- scripts-table:end -->")[0]
    assert block == scripts.table_markdown()
    for name in scripts.names():  # every script has a header naming its KEYS and ARGV
        assert f"`{name}-" in block and "KEYS[1]" in scripts.header(name)
