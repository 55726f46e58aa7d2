"""The job page's failure section (issue 32): the last error with its traceback and the
kept failures, newest first, each folded with its own traceback; the retry verb writes the
history in its transition, bounded to ``keep_errors``."""

from __future__ import annotations

import html
import json

from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs


def fail_runs(conn, queue: str, runs: int, keep: int) -> str:
    jid = ids.mint()
    jobs.enqueue(conn, queue, jid, encode("report.build", [1], {}))
    for n in range(1, runs + 1):
        jobs.promote(conn, queue, 100)
        c = jobs.claim(conn, queue, 10_000)
        assert c is not None and c.id == jid and c.token == n
        tb = f"Traceback (most recent call last):\n  File \"x.py\", line {n}\nKeyError: {n}"
        got = jobs.retry(conn, queue, jid, c.token, 0, runs, f"KeyError: {n}", tb, keep)
        assert got == ("dead" if n == runs else "retrying")
    return jid


def test_the_retry_transition_keeps_the_last_failures(conn, queue):
    jid = fail_runs(conn, queue, 4, keep=3)
    row = jobs.get(conn, queue, jid)
    assert row["traceback"].endswith("KeyError: 4")
    kept = json.loads(row["errors"])
    assert [(e["run"], e["error"]) for e in kept] == [(2, "KeyError: 2"), (3, "KeyError: 3"),
                                                      (4, "KeyError: 4")]
    assert kept[-1]["at_ms"] == int(row["died_at"])  # the transition's SERVER now
    # without the history's arguments the script writes none (an older caller)
    other = ids.mint()
    jobs.enqueue(conn, queue, other, b"x")
    c = jobs.claim(conn, queue, 10_000)
    assert c is not None
    assert jobs.retry(conn, queue, other, c.token, 0, 1, "E: x") == "dead"
    assert {"traceback", "errors"}.isdisjoint(jobs.get(conn, queue, other))


def test_job_page_shows_the_traceback_and_the_history(board, conn, queue):
    jid = fail_runs(conn, queue, 2, keep=10)
    code, page = board.get(f"/q/{queue}/job/{jid}")
    assert code == 200
    text = html.unescape(page)
    assert "<h2>Last error</h2>" in page and "KeyError: 2" in text
    assert "<h3>Traceback</h3>" in page and 'File "x.py", line 2' in text
    assert "Failures (2 kept, newest first)" in page
    section = text.split("Failures (2 kept", 1)[1]
    assert section.index("run 2") < section.index("run 1")  # newest first
    assert section.count("<details>") == 2 and 'File "x.py", line 1' in section
    # the fields the section draws are not repeated raw in the facts table
    assert "<th>errors</th>" not in page and "<th>traceback</th>" not in page
