"""``echomq repeat list|add|cancel|pause|resume|next`` against the session's real server
(``--url``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import valkey

from echomq.cli.main import main
from echomq.core import keyspace


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_next_cancel(
    capsys: pytest.CaptureFixture[str], url: str, raw: valkey.Valkey, queue: str
) -> None:
    base = ("--url", url, "--queue", queue)
    add = ("repeat", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Paris",
           "--payload", "hello", *base)  # fmt: skip
    assert cli(capsys, *add) == (0, "registered\n", "")
    assert cli(capsys, *add) == (0, "exists\n", "")
    changed = [a if a != "hello" else "bye" for a in add]
    assert cli(capsys, *changed)[1] == "updated\n"
    assert raw.hget(keyspace.repeat_key(queue, "nightly"), "template") == b"bye"

    code, out, _ = cli(capsys, "repeat", "add", "beat", "--every", "5m", "--limit", "3",
                       "--task", "reports.send", "1", '{"a": 2}', *base)  # fmt: skip
    assert (code, out) == (0, "registered\n")
    record = raw.hgetall(keyspace.repeat_key(queue, "beat"))
    assert record[b"every_ms"] == b"300000" and record[b"limit"] == b"3"
    assert b"reports.send" in record[b"template"]

    code, out, _ = cli(capsys, "repeat", "list", *base)
    lines = out.splitlines()
    assert lines[0].split() == ["QUEUE", "NAME", "CADENCE", "NEXT", "FIRED", "LAST"]
    assert {ln.split()[1] for ln in lines[1:]} == {"nightly", "beat"}
    assert "every 5m" in out and "'30 2 * * *' Europe/Paris" in out

    code, out, _ = cli(capsys, "repeat", "list", "--json", *base)
    rows = [json.loads(ln) for ln in out.splitlines()]
    assert {r["name"] for r in rows} == {"nightly", "beat"}

    code, out, _ = cli(capsys, "repeat", "next", "nightly", "--count", "3", *base)
    runs = out.splitlines()
    assert code == 0 and len(runs) == 3
    assert all(r.endswith(("T02:30:00+01:00", "T02:30:00+02:00", "T03:00:00+02:00"))
               for r in runs)  # fmt: skip

    code, out, _ = cli(capsys, "repeat", "next", "beat", "--count", "5", *base)
    assert len(out.splitlines()) == 3  # the limit leaves three

    assert cli(capsys, "repeat", "cancel", "beat", *base)[:2] == (0, "cancelled\n")
    assert cli(capsys, "repeat", "cancel", "beat", *base)[0] == 1
    assert raw.exists(keyspace.repeat_key(queue, "beat")) == 0
    assert cli(capsys, "repeat", "next", "beat", *base)[0] == 1


def test_next_of_a_bare_expression_needs_no_server(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "repeat", "next", "0 9 * * mon", "--tz", "America/New_York",
                       "--count", "2")  # fmt: skip
    first, second = out.splitlines()
    assert code == 0 and "T09:00:00-0" in first and "T09:00:00-0" in second


def test_bad_definitions_are_refused_before_connecting(
    capsys: pytest.CaptureFixture[str], raw: valkey.Valkey, queue: str
) -> None:
    # no --url and no server: a refusal must come before any connection is attempted
    code, _, err = cli(capsys, "repeat", "add", "bad", "--every", "5m", "--payload", "x",
                       "--window", "3s", "--queue", queue)  # fmt: skip
    assert code == 2 and "window_ms" in err
    code, _, err = cli(capsys, "repeat", "add", "bad", "--cron", "61 * * * *", "--payload",
                       "x", "--queue", queue)  # fmt: skip
    assert code == 2 and "minute" in err
    assert raw.keys(f"emq:{{{queue}}}:*") == []


def echomq(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "echomq.cli", *args, "--url", url],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_pause_resume_as_a_subprocess(url: str, raw: valkey.Valkey, queue: str) -> None:
    from echomq.connectors.connector import Connector
    from echomq.verbs import repeat

    add = echomq("repeat", "add", "beat", "--every", "1m", "--payload", "x", "--queue", queue,
                 url=url)
    assert add.returncode == 0, add.stderr
    score = raw.zscore(keyspace.queue_key(queue, "repeat"), "beat")
    done = echomq("repeat", "pause", "beat", "--queue", queue, url=url)
    assert (done.returncode, done.stdout) == (0, "paused\n"), done.stderr
    assert raw.hget(keyspace.repeat_key(queue, "beat"), "paused") == b"1"
    assert raw.zscore(keyspace.queue_key(queue, "repeat"), "beat") == score
    listed = echomq("repeat", "list", "--queue", queue, url=url)
    assert "paused (" in listed.stdout
    conn = Connector.connect(url)
    try:
        assert repeat.sweep(conn, queue, repeat.now_ms() + 120_000)[0].reason == "paused"
    finally:
        conn.close()
    done = echomq("repeat", "resume", "beat", "--queue", queue, url=url)
    assert (done.returncode, done.stdout) == (0, "resumed\n"), done.stderr
    assert raw.hget(keyspace.repeat_key(queue, "beat"), "paused") is None
    for verb in ("pause", "resume", "cancel"):
        gone = echomq("repeat", verb, "ghost", "--queue", queue, url=url)
        assert gone.returncode == 1 and gone.stdout == ""
        assert "no registration named 'ghost'" in gone.stderr and "Traceback" not in gone.stderr
