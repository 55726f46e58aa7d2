"""Guarded task names (issue 32): ``echomq enqueue`` refuses a short task name that another
queue declares when nothing serves the queue it names; a task declared in a script run as
``__main__`` warns with the fix."""

from __future__ import annotations

import subprocess
import sys

from echomq.verbs import declarations, registry
from tests.support.cli import echomq


def test_a_short_name_declared_on_another_queue_is_refused(conn, url, queue):
    shop = f"{queue}-shop"
    registry.add(conn, [shop])
    declarations.declare(conn, shop, {"shop.send": {}})
    done = echomq("enqueue", "send", "--queue", f"{queue}-idle", url=url)
    assert done.returncode == 2, done.stdout
    assert f"it is declared on queue {shop!r} as 'shop.send'" in done.stderr
    assert f"pass --queue {shop} and the name shop.send" in done.stderr
    assert "Traceback" not in done.stderr
    forced = echomq("enqueue", "send", "--queue", f"{queue}-idle", "--force", url=url)
    assert forced.returncode == 0, forced.stderr


def test_a_task_declared_in_main_warns_with_the_fix(url, tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(f"from echomq import App\napp = App({url!r})\n"
                      "@app.task\ndef send(to):\n    pass\n"
                      "@app.task(name='named')\ndef quiet():\n    pass\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "task 'send' is declared in __main__" in done.stderr
    assert "'mine.send'" in done.stderr and "define it in a module and import it" in done.stderr
    assert "named" not in done.stderr  # a task given a name has one name everywhere
