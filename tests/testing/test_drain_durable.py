"""The kit drives durable steps as a worker does: a sleep is over once time travel
(``with_scheduled``, ``advance``) reaches its wake, a wait resumes on its signal."""

from __future__ import annotations

import datetime as dt

from echomq import current_job, testing


def _onboarding(app, calls: list[str]):
    @app.task(queue="flows-kit")
    def onboard(user: int) -> str:
        job = current_job()
        name = job.step("fetch", lambda: calls.append("fetch") or f"user-{user}")
        job.sleep("cool-off", dt.timedelta(hours=1))
        return job.step("welcome", lambda: calls.append("welcome") or f"hi {name}")

    return onboard


def test_drain_with_scheduled_wakes_a_sleeping_job(echomq_app) -> None:
    calls: list[str] = []
    jid = _onboarding(echomq_app, calls).enqueue(7)
    assert testing.drain(echomq_app).completed == 0 and calls == ["fetch"]
    done = testing.drain(echomq_app, with_scheduled=True)
    assert done.completed == 1 and done.results[jid] == "hi user-7"
    assert calls == ["fetch", "welcome"]  # the recorded step did not run again


def test_advance_past_the_wake_ends_the_sleep_and_short_of_it_does_not(echomq_app) -> None:
    calls: list[str] = []
    jid = _onboarding(echomq_app, calls).enqueue(8)
    testing.drain(echomq_app)
    testing.advance(echomq_app, dt.timedelta(minutes=30))
    assert testing.drain(echomq_app).completed == 0  # half way: it sleeps on
    testing.advance(echomq_app, dt.timedelta(minutes=31))
    done = testing.drain(echomq_app)
    assert done.completed == 1 and done.results[jid] == "hi user-8"
    assert calls == ["fetch", "welcome"]


def test_drain_resumes_a_wait_on_its_signal(echomq_app) -> None:
    @echomq_app.task(queue="flows-kit")
    def approve() -> object:
        return current_job().wait_for("approval:1", timeout=dt.timedelta(hours=1))

    jid = approve.enqueue()
    assert testing.drain(echomq_app).completed == 0
    assert echomq_app.signal("approval:1", {"ok": True}) == 1
    done = testing.drain(echomq_app)
    assert done.completed == 1 and done.results[jid] == {"ok": True}
