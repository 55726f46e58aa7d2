"""The integration examples run as a user runs them: a request through the framework's own
test client enqueues, a real worker process (``echomq worker`` for FastAPI, ``manage.py
echomq_worker`` for Django) runs the job against the test Valkey, and the framework's job
endpoint reports it completed."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # the fast loop (-m 'not slow') leaves this file out

EXAMPLES = ROOT / "examples"


@pytest.fixture
def example_env(url: str) -> dict[str, str]:
    return {**os.environ, "ECHOMQ_URL": url, "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def fresh_modules() -> Iterator[None]:
    """The examples use plain module names (tasks, main, mysite, shop): forget them after."""
    before = set(sys.modules)
    path = list(sys.path)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.path[:] = path


def start(argv: list[str], cwd: pathlib.Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert proc.stdout is not None
    return proc.stdout.read()


def wait_state(read: Callable[[], dict[str, Any]], want: str, proc: subprocess.Popen[str],
               timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = read()
        if body.get("state") == want:
            return body
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"job stayed {body}; worker said:\n{finish(proc)}")
        time.sleep(0.05)


def test_fastapi_endpoint_enqueues_and_a_worker_runs_it(example_env, fresh_modules, monkeypatch):
    from fastapi.testclient import TestClient

    where = EXAMPLES / "fastapi_app"
    monkeypatch.setenv("ECHOMQ_URL", example_env["ECHOMQ_URL"])
    sys.path.insert(0, str(where))
    import main  # the example's module, as uvicorn would import it

    worker = start([sys.executable, "-m", "echomq.cli", "worker", "tasks:app",
                    "--beat-ms", "50"], where, example_env)
    try:
        with TestClient(main.api) as client:  # runs the lifespan
            resp = client.post("/signup", json={"email": "ada@example.com"})
            assert resp.status_code == 202, resp.text
            job_id = resp.json()["job"]
            assert job_id.startswith("JOB")
            done = wait_state(lambda: client.get(f"/jobs/{job_id}").json(), "completed", worker)
            assert done["task"] == "send_welcome" and done["attempts"] == 1
            assert client.get("/jobs/JOB00000000000000000000000000").status_code == 404
    finally:
        out = finish(worker)
    assert "welcome email sent to ada@example.com" in out
    assert worker.returncode == 0, out


def test_django_view_enqueues_and_the_management_command_runs_it(example_env, fresh_modules,
                                                                monkeypatch):
    where = EXAMPLES / "django_project"
    monkeypatch.setenv("ECHOMQ_URL", example_env["ECHOMQ_URL"])
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "mysite.settings")
    sys.path.insert(0, str(where))
    import django
    from django.test import Client

    django.setup()
    worker = start([sys.executable, "manage.py", "echomq_worker", "--concurrency", "2"],
                   where, {**example_env, "DJANGO_SETTINGS_MODULE": "mysite.settings"})
    try:
        client = Client()
        resp = client.post("/orders/", {"order_id": 42, "email": "grace@example.com"},
                           content_type="application/json")
        assert resp.status_code == 202, resp.content
        job_id = resp.json()["job"]
        wait_state(lambda: client.get(f"/jobs/{job_id}/").json(), "completed", worker)
        assert client.get("/orders/").status_code == 405  # GET is not an order
    finally:
        out = finish(worker)
    assert "receipt for order 42 sent to grace@example.com (debug=True)" in out
    assert worker.returncode == 0, out
