"""``echomq enqueue --app``: the arguments are bound to the task's function as
``task.enqueue`` binds them; a call that does not fit exits 2 with one line and writes
nothing. Without ``--app`` the CLI cannot know the function and admits the job as given."""

from __future__ import annotations

from echomq.core import keyspace
from tests.support.cli import echomq

APP = '''
from echomq import App

app = App()

@app.task(queue="{q}")
def send_email(to, subject):
    pass

@app.task(queue="{q}", check_args=False)
def anything(x):
    pass
'''


def test_enqueue_with_app_binds_the_arguments(tmp_path, url, raw, queue, snap):
    (tmp_path / "mail_app.py").write_text(APP.format(q=queue))
    before = snap(queue)
    done = echomq("enqueue", "send_email", "only-one-arg", "--app", "mail_app:app",
                  url=url, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "missing a required argument: 'subject'" in lines[0]
    assert "send_email(to, subject)" in lines[0] and "nothing was queued" in lines[0]
    bad_kw = echomq("enqueue", "send_email", "a", "--kwargs", '{"subject": "x", "cc": "y"}',
                    "--app", "mail_app:app", url=url, cwd=tmp_path)
    assert bad_kw.returncode == 2 and "unexpected keyword argument 'cc'" in bad_kw.stderr
    assert snap(queue) == before
    ok = echomq("enqueue", "send_email", "a@b.c", "hi", "--app", "mail_app:app", url=url,
                cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    loose = echomq("enqueue", "anything", "1", "2", "--app", "mail_app:app", url=url,
                   cwd=tmp_path)
    assert loose.returncode == 0, loose.stderr  # check_args=False
    assert raw.zcard(keyspace.queue_key(queue, "pending")) == 2
