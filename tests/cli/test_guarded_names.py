"""Guarded queue names (issue 32): a command that acts on a queue refuses a name no
producer, worker, registration or stored job has used (exit 2, "did you mean", no
traceback, nothing done); ``--force`` goes on; a known name works as before."""

from __future__ import annotations

import pytest

from echomq.core import ids
from echomq.core.payload import encode
from echomq.verbs import jobs, registry
from tests.support.cli import echomq


def refused(done, typo: str, meant: str | None) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"no queue named {typo!r} is known" in done.stderr
    if meant is not None:
        assert f"did you mean {meant!r}?" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [
    ("pause", "{typo}"), ("resume", "{typo}"), ("rate", "{typo}", "5/1s"),
    ("purge", "{typo}", "--state", "pending", "--yes"), ("stats", "--queue", "{typo}"),
], ids=["pause", "resume", "rate", "purge", "stats"])
def test_a_typo_is_refused_with_the_closest_known_name(conn, url, queue, command):
    meant, typo = f"{queue}payments", f"{queue}paymnets"
    registry.add(conn, [meant])
    done = echomq(*(w.format(typo=typo) for w in command), url=url)
    refused(done, typo, meant)
    assert not jobs.is_paused(conn, typo)
    forced = echomq(*(w.format(typo=typo) for w in command), "--force", url=url)
    assert forced.returncode == 0, forced.stderr
    if command[0] == "pause":
        assert jobs.is_paused(conn, typo)


def test_a_queue_known_by_a_stored_job_only_is_accepted(conn, url, queue):
    jobs.enqueue(conn, queue, ids.mint(), encode("t", []))  # low-level: not registered
    done = echomq("pause", queue, url=url)
    assert done.returncode == 0, done.stderr
    assert jobs.is_paused(conn, queue)
    assert echomq("resume", queue, url=url).returncode == 0


def test_worker_refuses_an_unknown_queue(url, queue, tmp_path):
    (tmp_path / "shop.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.task(queue={queue + 'payments'!r})\ndef pay() -> None: ...\n")
    done = echomq("worker", "shop:app", "--queues", f"{queue}paymnets", "--burst",
                  url=url, cwd=tmp_path)
    refused(done, f"{queue}paymnets", f"{queue}payments")
    ok = echomq("worker", "shop:app", "--queues", f"{queue}payments", "--burst",
                url=url, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
