"""The weather a process logs (``runtime.weather``): one WARNING when the first loop fails,
nothing while the others fail too, one INFO when the first loop that failed answers (the
process stays degraded until every one has); a failure just after the recovery continues
the same outage, silently."""

from __future__ import annotations

import logging

import pytest

from echomq.runtime import weather as weather_mod
from echomq.runtime.weather import Weather


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records
            if r.levelno >= logging.INFO]


def test_an_outage_is_two_lines_however_many_loops_fail(caplog):
    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    w = Weather("worker 7")
    for _ in range(20):
        w.failed("consumer a", ConnectionError("refused"), 100)
        w.failed("metronome", ConnectionError("refused"), 100)
    assert w.degraded
    w.answered("pump")  # a loop that never failed changes nothing
    assert w.degraded and len(_lines(caplog)) == 1
    w.answered("metronome")  # the server is back: the line now, though one loop is not yet
    assert w.degraded and len(_lines(caplog)) == 2
    w.answered("consumer a")
    assert not w.degraded
    (warning, info) = _lines(caplog)
    assert warning[0] == "WARNING" and warning[1].startswith("worker 7 degraded: the server")
    assert "consumer a: refused" in warning[1] and "next try in 0.1 s" in warning[1]
    assert info[0] == "INFO" and "recovered" in info[1] and "(40 failed calls)" in info[1]


def test_a_relapse_right_after_the_recovery_is_silent(caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    clock = [100.0]
    monkeypatch.setattr(weather_mod.time, "monotonic", lambda: clock[0])
    w = Weather()
    w.failed("consumer a", OSError("x"))
    clock[0] += 6
    w.answered("consumer a")
    clock[0] += 1  # a pooled connection broken by the outage fails once when next used
    w.failed("consumer a", OSError("stale"))
    w.answered("consumer a")
    assert len(_lines(caplog)) == 2
    clock[0] += weather_mod.RELAPSE_S + 1  # a new outage, well after: logged again
    w.failed("consumer a", OSError("down again"))
    w.answered("consumer a")
    assert [lvl for lvl, _ in _lines(caplog)] == ["WARNING", "INFO", "WARNING", "INFO"]


def test_a_loop_that_gets_through_wakes_the_others_from_their_backoff():
    import asyncio
    import time

    async def main() -> float:
        w = Weather()
        stop = asyncio.Event()
        w.failed("consumer a", OSError("x"))
        w.failed("metronome", OSError("x"))
        t0 = time.monotonic()
        sleeper = asyncio.ensure_future(w.pause(30, stop))  # the metronome's long backoff
        await asyncio.sleep(0.05)
        w.answered("pump")  # a loop that never failed: no news, nobody woken
        await asyncio.sleep(0.05)
        assert not sleeper.done()
        w.answered("consumer a")  # the server is back for a loop that had failed
        await asyncio.wait_for(sleeper, 1)
        return time.monotonic() - t0

    assert asyncio.run(main()) < 1


def test_the_recovery_line_is_timed_to_the_first_answer_not_the_slowest_loop(caplog,
                                                                             monkeypatch):
    # the fault drill: a 20 s blackhole logged as 26 s, 11 s after the network returned,
    # because one loop was still asleep on its backoff (or stuck in a socket timeout)
    caplog.set_level(logging.INFO, logger="echomq.worker")
    clock = [100.0]
    monkeypatch.setattr(weather_mod.time, "monotonic", lambda: clock[0])
    w = Weather("worker 9")
    w.failed("consumer a", OSError("timeout"), 1_000)
    w.failed("worker control", OSError("timeout"), 30_000)
    clock[0] += 20.0  # the network returns and the consumer gets through at once
    w.answered("consumer a")
    clock[0] += 11.0  # the control loop's long backoff ends
    w.answered("worker control")
    info = [m for lvl, m in _lines(caplog) if lvl == "INFO"]
    assert len(info) == 1 and "after 20.0 s" in info[0], info
    assert not w.degraded
