"""The pytest plugin, run on generated test files (``pytester``): the fixtures work, a
failing test fails, every test starts on an empty keyspace, and under pytest-xdist each
worker has its own server. A session that asks for no fixture starts no server."""

from __future__ import annotations

import pytest

from echomq.embedded.server import EmbeddedServer

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # a pytest session per test: seconds each

PLUGIN = ("-p", "echomq.testing.plugin")

SUITE = '''
from echomq import testing
from echomq.verbs import jobs


def test_enqueue_and_drain(echomq_app):
    @echomq_app.task(queue="mail", name="send", keep_result=60)
    def send(to):
        return "sent " + to

    jid = send.enqueue("a@b.c")
    testing.assert_enqueued(send, args=["a@b.c"], count=1)
    assert testing.drain(echomq_app).results == {jid: "sent a@b.c"}
    assert echomq_app.job(jid).result == "sent a@b.c"


def test_a_wrong_expectation_fails(echomq_app):
    @echomq_app.task(queue="mail", name="send")
    def send(to):
        return None

    send.enqueue("a@b.c")
    testing.assert_enqueued(send, args=["nobody@b.c"])


def test_the_url_is_the_apps(echomq_url, echomq_app):
    assert echomq_app.url == echomq_url and echomq_url.startswith("valkey://")
'''


def test_a_generated_suite_passes_and_fails_as_it_should(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    got = pytester.runpytest(*PLUGIN)
    got.assert_outcomes(passed=2, failed=1)
    out = got.stdout.str()
    assert "expected at least 1 send(args=['nobody@b.c']) enqueued, found 0" in out
    assert "mail: send(args=['a@b.c'], kwargs={}) pending JOB" in out


CLEAN = '''
import pytest
import valkey
from echomq import testing
from echomq.verbs import registry

@pytest.mark.parametrize("n", range(6))
def test_each_test_starts_empty(echomq_app, n):
    conn = echomq_app.connector()
    with valkey.Valkey.from_url(echomq_app.url) as raw:
        assert raw.dbsize() == 0, "a key from an earlier test is still there"
    assert registry.names(conn) == []

    @echomq_app.task(queue=f"q{n % 2}")
    def leave(x):
        return x

    leave.enqueue(n)
    leave.enqueue_in(60_000, n)
    testing.drain(echomq_app, limit=1) if n % 3 == 0 else None
    assert registry.names(conn) == [f"q{n % 2}"]
'''


def test_the_keyspace_is_clean_for_each_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_clean=CLEAN)
    pytester.runpytest(*PLUGIN, "-p", "no:randomly").assert_outcomes(passed=6)


CLASH = '''
import pytest

@pytest.fixture
def server():
    return "the project's own server fixture"

@pytest.fixture
def url():
    return "the project's own url"

@pytest.fixture
def app():
    return "the project's own app"
'''

USES_BOTH = '''
def test_both(server, url, app, echomq_url, echomq_app):
    assert (server, url, app) == ("the project's own server fixture",
                                  "the project's own url", "the project's own app")
    assert echomq_app.url == echomq_url != url
'''


def test_the_projects_own_fixtures_stay_its_own(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CLASH)
    pytester.makepyfile(test_both=USES_BOTH)
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)


def test_no_fixture_asked_no_server_started(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    real = EmbeddedServer.start

    def counting(self: EmbeddedServer) -> None:
        started.append(self)
        real(self)

    monkeypatch.setattr(EmbeddedServer, "start", counting)
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    assert started == []
    pytester.makepyfile(test_url="def test_url(echomq_url):\n    assert echomq_url\n"
                                 "def test_again(echomq_url):\n    assert echomq_url\n")
    pytester.runpytest(*PLUGIN, "test_url.py").assert_outcomes(passed=2)
    assert len(started) == 1  # one server for the session, however many tests ask


XDIST = '''
import os
import pytest
from echomq import testing

@pytest.mark.parametrize("n", range(8))
def test_worker(echomq_url, echomq_app, n, tmp_path_factory):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    root = tmp_path_factory.getbasetemp().parent
    (root / f"url-{worker}-{n}").write_text(echomq_url)

    @echomq_app.task(queue="q")
    def job(x):
        return x

    job.enqueue(n)
    assert testing.drain(echomq_app).results.popitem()[1] == n
    assert testing.enqueued(echomq_app) == []
'''


def test_under_xdist_each_worker_has_its_own_server(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")  # the test extras install it
    pytester.makepyfile(test_xdist=XDIST)
    got = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", "-p", "no:cacheprovider")
    got.assert_outcomes(passed=8)
    urls = {}
    for path in pytester.path.parent.rglob("url-*"):
        urls.setdefault(path.name.split("-")[1], set()).add(path.read_text())
    assert sorted(urls) == ["gw0", "gw1"]
    assert all(len(u) == 1 for u in urls.values())  # one server per worker
    assert urls["gw0"] != urls["gw1"]
