"""The integration examples and the three ported apps, tested the way the kit means a
project to: through the framework's test client, then ``assert_enqueued`` and ``drain`` in
the same test, on the plugin's fixtures (no worker process, no polling)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from echomq import testing
from tests.e2e.test_examples import fresh_modules  # noqa: F401
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


@pytest.fixture
def example(echomq_url: str, echomq_app: object, monkeypatch: pytest.MonkeyPatch,
            request: pytest.FixtureRequest) -> Callable[[str], None]:
    """``example(name)``: make ``examples/<name>`` importable, its apps on the test server
    (``ECHOMQ_URL``), the keyspace empty; its modules are forgotten after the test
    (``fresh_modules``, the e2e examples' fixture)."""
    request.getfixturevalue("fresh_modules")
    monkeypatch.setenv("ECHOMQ_URL", echomq_url)

    def use(name: str) -> None:
        sys.path.insert(0, str(EXAMPLES / name))

    return use


def test_fastapi_signup(example: Callable[[str], None],
                        capsys: pytest.CaptureFixture[str]) -> None:
    from fastapi.testclient import TestClient

    example("fastapi_app")
    import main
    import tasks

    with TestClient(main.api) as client:
        job_id = client.post("/signup", json={"email": "ada@example.com"}).json()["job"]
    testing.assert_enqueued(tasks.send_welcome, args=["ada@example.com"], count=1)
    testing.assert_enqueued(tasks.build_report, args=[1, "weekly"], count=1)
    done = testing.drain(tasks.app, with_scheduled=True)  # the report is 200 ms out
    assert (done.completed, done.retried, done.dead) == (2, 0, 0)
    assert "welcome email sent to ada@example.com" in capsys.readouterr().out
    assert tasks.app.job(job_id).state == "completed"  # kept an hour by the example's app
    tasks.app.close()


def test_django_order(example: Callable[[str], None], monkeypatch: pytest.MonkeyPatch,
                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "mysite.settings")
    example("django_project")
    import django
    from django.test import Client

    django.setup()
    from shop import tasks

    resp = Client().post("/orders/", {"order_id": 42, "email": "grace@example.com"},
                         content_type="application/json")
    assert resp.status_code == 202
    testing.assert_enqueued(tasks.send_receipt, args=[42, "grace@example.com"], count=1)
    assert testing.drain(tasks.app).completed == 1
    assert "receipt for order 42 sent to grace@example.com" in capsys.readouterr().out
    assert tasks.app.job(resp.json()["job"]).state == "completed"
    tasks.app.close()


def test_the_celery_port(example: Callable[[str], None]) -> None:
    example("from_celery")
    from echomq import chain, group

    import tasks

    app = tasks.app
    total = chain(tasks.add.s(2, 2), tasks.add.s(4), tasks.add.s(8)).enqueue()
    chord = group(*(tasks.add.s(i, i) for i in range(10))).then(tasks.xsum.s()).enqueue()
    timeline = tasks.refresh_timeline.enqueue("ada")
    tweet = tasks.send_twitter_status.enqueue("token", "hello")
    done = testing.drain(app, with_scheduled=True)  # the retries' backoffs, as if waited
    assert done.dead == 0 and done.retried == 3  # two fail whales, one Retry
    assert {k: done.results[k] for k in (total, chord, timeline, tweet)} == {
        total: 16, chord: 90, timeline: "timeline of ada refreshed after 3 runs",
        tweet: "sent 'hello' after 2 runs"}
    assert testing.perform(tasks.add, 4, 4) == 8
    app.close()


def test_the_rq_port(example: Callable[[str], None]) -> None:
    example("from_rq")
    import tasks

    hello = tasks.say_hello.enqueue("ada", fail_runs=2)
    quarter = tasks.divide.enqueue(1, 4)
    zero = tasks.divide.enqueue(1, 0)
    crunched = tasks.crunch.enqueue(3)
    done = testing.drain(tasks.app, with_scheduled=True)
    assert (done.retried, done.dead) == (2, 1)
    assert done.results[hello] == "Hello ada!" and done.results[quarter] == 0.25
    assert done.errors[zero] == "ZeroDivisionError: division by zero"
    reports = [r.decode() for r in tasks.r.lrange(f"{tasks.Q}:reports", 0, -1)]
    assert sorted(reports) == ["failure divide: ZeroDivisionError: division by zero",
                               "success divide -> 0.25"]
    info = tasks.app.job(crunched)
    assert info is not None and info.progress == {"done": 3, "of": 3}
    tasks.r.close()
    tasks.app.close()


def test_the_arq_port(example: Callable[[str], None]) -> None:
    example("from_arq")
    import tasks

    ids = [tasks.download_content.enqueue(u) for u in tasks.PAGES]
    done = testing.drain(tasks.app, with_scheduled=True)  # github's two 503s, retried
    assert [done.results[i] for i in ids] == [133, 313, 93]
    assert done.retried == 2 and tasks.app.job(ids[2]).runs == 3  # type: ignore[union-attr]
    assert testing.perform(tasks.the_task, 21) == 42
    tasks.app.close()
