"""Errors a person can read: every failure of the ``echomq`` command (run as a subprocess)
is one or two lines on stderr naming the problem and the fix, a non-zero exit and no
traceback (``--verbose`` shows it); declarations are checked when they are made; a job
no task fits is dead-lettered on its first attempt."""

from __future__ import annotations

import signal
import socket

import pytest

from echomq import App
from echomq.core import ids, keyspace
from echomq.verbs import jobs
from tests.support.cli import echomq, popen
from tests.support.polling import wait_for

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out


def dead_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def short(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, err
    assert "Traceback" not in err
    return lines


APP = """
from echomq import App
app = App()

@app.task(queue="{q}", name="known")
def known():
    pass
"""


@pytest.mark.parametrize("command", [
    ["stats"], ["job", "JOB01M8RHCNZF1M3H8WVGNFY4309J"], ["dead", "list"],
    ["dead", "retry", "--all"], ["enqueue", "t"], ["repeat", "list"],
    ["worker", "app_mod:app"],
], ids=lambda c: " ".join(c[:2]))
def test_an_unreachable_server_is_one_line_and_a_fix(tmp_path, queue, command):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    url = f"valkey://:hunter2@127.0.0.1:{dead_port()}/0"
    done = echomq(*command, url=url, cwd=tmp_path, timeout=30)
    assert done.returncode == 1
    first, second = short(done.stderr)
    port = url.rsplit(":", 1)[1].split("/")[0]
    assert first.startswith(f"echomq: cannot reach Valkey at 127.0.0.1:{port} "
                            "(connection refused)")
    assert "echomq server" in second and "ECHOMQ_URL" in second
    assert "hunter2" not in done.stderr
    assert "never retrieved" not in done.stderr
    verbose = echomq(*command, "--verbose", url=url, cwd=tmp_path, timeout=30)
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr


def test_bad_arguments_are_refused_before_anything_is_written(url, raw, queue, snap):
    for command in (["enqueue", "t", "--queue", "a{b}"], ["stats", "--queue", "a{b}"],
                    ["job", "JOB01M8RHCNZF1M3H8WVGNFY4309J", "--queue", "a{b}"]):
        done = echomq(*command, url=url)
        assert done.returncode == 2, done.stderr
        assert "must not contain '{' or '}'" in short(done.stderr)[0]
    assert not raw.sismember(keyspace.registry_key(), "a{b}")

    done = echomq("enqueue", "t", "--kwargs", "{y: 2}", "--queue", queue, url=url)
    assert done.returncode != 0
    assert "--kwargs is not JSON" in short(done.stderr)[0] and '{"y": 2}' in done.stderr
    done = echomq("enqueue", "t", "--id", "1234", "--queue", queue, url=url)
    assert done.returncode != 0 and "is not a job id" in short(done.stderr)[0]
    assert snap(queue) == {}


def test_durations_need_a_unit_and_are_never_negative(url, raw, queue, snap):
    bare = echomq("schedule", "t", "--in", "5", "--queue", queue, url=url)
    assert bare.returncode == 2
    assert "'5' needs a unit: 5s for seconds or 5ms" in short(bare.stderr)[0]
    negative = echomq("schedule", "t", "--in", "-5s", "--queue", queue, url=url)
    assert negative.returncode == 2
    assert "'-5s' is negative" in short(negative.stderr)[0]
    every = echomq("repeat", "add", "r", "--every", "30", "--payload", "x", "--queue", queue,
                   url=url)
    assert every.returncode == 2 and "needs a unit" in every.stderr
    assert snap(queue) == {}
    ok = echomq("schedule", "t", "--in", "250ms", "--queue", queue, url=url)
    assert ok.returncode == 0, ok.stderr
    assert raw.zcard(keyspace.queue_key(queue, "schedule")) == 1


def test_declarations_are_checked_when_made():
    app = App("valkey://127.0.0.1:1/0")  # never contacted

    def tick() -> None: ...

    with pytest.raises(ValueError, match="minute: '99' is outside 0-59"):
        app.cron("99 * * * *")
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        app.cron("0 * * * *", tz="Mars/Olympus")
    for bad in ({"max_attempts": 0}, {"lease_ms": -1}, {"retry_delay_ms": -5},
                {"queue": "a{b}"}, {"name": ""}, {"backoff": ("exponential", -1, 10)}):
        with pytest.raises((ValueError, TypeError)):
            app.task(**bad)(tick)
    assert app.tasks == {} and app.recurrences == []


@pytest.mark.parametrize("decl", ['@app.cron("99 * * * *")',
                                  '@app.cron("0 * * * *", tz="Mars/Olympus")'])
def test_a_worker_with_a_bad_declaration_prints_one_error(tmp_path, url, decl):
    (tmp_path / "bad_mod.py").write_text(
        f"from echomq import App\napp = App()\n{decl}\n@app.task\ndef tick(): pass\n")
    done = echomq("worker", "bad_mod:app", url=url, cwd=tmp_path, timeout=30)
    assert done.returncode == 2
    (line,) = short(done.stderr)
    assert line.startswith("echomq: bad_mod: @app.cron(")
    assert "tzdata" not in done.stderr and "never retrieved" not in done.stderr


def test_enqueue_with_app_refuses_an_unknown_task_before_writing(tmp_path, url, queue, snap):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    done = echomq("enqueue", "nope", "--app", "app_mod:app", url=url, cwd=tmp_path)
    assert done.returncode != 0
    assert "has no task named 'nope' (its tasks: known)" in short(done.stderr)[0]
    assert snap(queue) == {}


def test_a_job_no_task_fits_is_dead_on_its_first_attempt(tmp_path, url, conn, raw, queue):
    (tmp_path / "app_mod.py").write_text(APP.format(q=queue))
    unknown, garbage = ids.mint(), ids.mint()
    jobs.enqueue(conn, queue, unknown, b'{"args":[],"kwargs":{},"task":"nope"}')
    jobs.enqueue(conn, queue, garbage, b"not a task payload")
    proc = popen("worker", "app_mod:app", url=url, cwd=tmp_path)
    try:
        wait_for(lambda: raw.zcard(keyspace.queue_key(queue, "dead")) >= 2, 15, "both jobs dead",
                 every=0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    err = proc.stderr.read().decode()
    for jid, why in ((unknown, "LookupError: unknown task 'nope': this app has no task of "
                               "that name (its tasks: known)"),
                     (garbage, "ValueError: not an EchoMQ task payload")):
        row = raw.hgetall(keyspace.job_key(queue, jid))
        assert (row[b"state"], row[b"attempts"]) == (b"dead", b"1")
        assert row[b"error"].decode().startswith(why)
        (line,) = [ln for ln in err.splitlines() if jid in ln]  # one line, naming the task
        task = "nope" if jid == unknown else "?"
        assert f"job {jid} {task}: dead after 1 run (1 failure): {why}" in line  # the type kept
        assert line.endswith(" ms)")  # and the run time
    assert "retry in" not in err


def test_a_worker_that_fails_after_its_start_stops_cleanly_with_one_error(tmp_path, url, raw,
                                                                        queue):
    # the registration's key holds a string, so the Pump's upsert is refused by the server
    # after the Metronome has started: the worker must stop it and print one error
    poisoned = (keyspace.repeat_key(queue, "tick"), keyspace.queue_key(queue, "repeat"))
    for key in poisoned:
        raw.set(key, "x")
    (tmp_path / "wt_mod.py").write_text(
        "from echomq import App\napp = App()\n"
        f"@app.every(60_000, name='tick')\n@app.task(queue='{queue}')\ndef tick(): pass\n")
    try:
        done = echomq("worker", "wt_mod:app", url=url, cwd=tmp_path, timeout=30)
    finally:
        # the server is shared by the session: a later listing of every queue (``repeat
        # list``) must not trip over this test's wrong-typed keys
        raw.delete(*poisoned)
    assert done.returncode == 1
    errors = [ln for ln in done.stderr.splitlines() if " INFO " not in ln]
    assert len(errors) == 1 and errors[0].startswith("echomq: WRONGTYPE"), done.stderr
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr
