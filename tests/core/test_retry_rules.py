"""The pure parts of errors and retries: a backoff given as a list of delays, rates as
people write them, the one vocabulary of a job's counts, and the verdict on a failed run."""

from __future__ import annotations

import datetime as dt

import pytest

from echomq import Fail, Retry, backoff
from echomq.core import rates
from echomq.core.tally import Tally, of_row
from echomq.runtime.verdict import exception_classes, judge


def test_a_list_backoff_gives_its_delays_in_order_and_repeats_the_last():
    policy = [1_000, 5_000, 30_000]
    assert [backoff.delay_ms(policy, n) for n in range(1, 7)] == [
        1_000, 5_000, 30_000, 30_000, 30_000, 30_000]
    # a tuple of delays is the same policy (what a list is after JSON and tuple())
    assert backoff.delay_ms((200, 400), 5) == 400
    # the tuple forms are unchanged (DESIGN §3)
    assert backoff.delay_ms(("exponential", 100, 10_000), 3) == 400
    assert backoff.delay_ms(("fixed", 250), 9) == 250
    for _ in range(20):
        assert 0 <= backoff.delay_ms(("jitter", [100, 900]), 2) <= 900


def test_a_list_backoff_takes_timedeltas_and_normalizes_to_ms():
    policy = [dt.timedelta(seconds=1), 5_000, dt.timedelta(milliseconds=30_500)]
    assert backoff.delay_ms(policy, 3) == 30_500
    assert backoff.normalize(policy) == [1_000, 5_000, 30_500]
    assert backoff.normalize(("jitter", (dt.timedelta(seconds=2),))) == ("jitter", [2_000])
    assert backoff.normalize(("fixed", 5)) == ("fixed", 5)


@pytest.mark.parametrize(("policy", "error", "words"), [
    ([], ValueError, "at least one delay"),
    ([1_000, -1], ValueError, "item 1 must be 0.."),
    ([1_000, "5s"], TypeError, "item 1 must be an int of ms or a timedelta"),
    ([1.5], TypeError, "item 0"),
    ([True], TypeError, "item 0"),
    ([dt.timedelta(seconds=-1)], ValueError, "item 0"),
    (list(range(backoff.MAX_STEPS + 1)), ValueError, "at most"),
    ("fixed", TypeError, "a tuple or a list"),
])
def test_a_bad_list_backoff_is_refused(policy, error, words):
    with pytest.raises(error, match=words):
        backoff.validate(policy)


def test_rates_read_as_the_cli_reads_them():
    assert rates.parse("10/s") == (10, 1_000)
    assert rates.parse("600/1m") == (600, 60_000)
    assert rates.parse(" 5 / 250ms ") == (5, 250)
    assert rates.parse((3, dt.timedelta(seconds=2))) == (3, 2_000)
    assert rates.show((10, 1_000)) == "10/1s" and rates.show(None) == "-"
    for bad, error, words in (("10", ValueError, "not a rate"), ("0/s", ValueError,
                              "never start"), ("10/5", ValueError, "needs a unit"),
                              (10, TypeError, "MAX/DURATION"), ((1, 1.5), TypeError, "ints")):
        with pytest.raises(error, match=words):
            rates.parse(bad)


def test_the_counts_vocabulary():
    assert Tally(4, 2, 2).text() == "4 runs (2 failures, 2 delays)"
    assert Tally(1, 1).text() == "1 run (1 failure)"
    assert Tally(3, 1, 0, 1).text() == "3 runs (1 failure, 1 stalled)"
    assert Tally(4, 2, 2).spent == 2
    assert of_row({"attempts": "4", "failures": "2", "delays": "2"}) == Tally(4, 2, 2, 0)


class Transient(OSError):
    pass


def test_the_verdict_on_a_failed_run():
    on, off = exception_classes("retry_on", (OSError,)), exception_classes(
        "dont_retry_on", ConnectionResetError)
    assert judge(Transient("x"), on, off).reason == "backoff"  # a subclass retries
    v = judge(ConnectionResetError("x"), on, off)  # dont_retry_on wins over retry_on
    assert (v.final, v.reason, v.error) == (True, "dont_retry_on", "ConnectionResetError: x")
    assert judge(ValueError("x"), on, off).reason == "retry_on"
    assert judge(ValueError("x")).reason == "backoff"  # by default every error retries
    assert judge(TimeoutError("late"), on).reason == "backoff"  # a timeout is an OSError
    v = judge(Fail("no such user"), on, off)
    assert (v.final, v.reason, v.error) == (True, "fail", "Fail: no such user")
    v = judge(Retry(dt.timedelta(seconds=2), error=KeyError("k")), (), ())
    assert (v.final, v.reason, v.delay_ms, v.error) == (False, "retry", 2_000, "KeyError: 'k'")
    assert judge(Retry(5)).error == "Retry: retry in 5 ms"
    assert judge(Retry(5, error="busy")).error == "Retry: busy"


def test_bad_retry_arguments_are_refused_where_they_are_written():
    with pytest.raises(TypeError, match="exception classes"):
        exception_classes("retry_on", ("OSError",))
    with pytest.raises(TypeError, match="exception classes"):
        exception_classes("retry_on", 3)
    with pytest.raises(ValueError):
        Retry(-1)
    with pytest.raises(TypeError):
        Retry(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="exception or a text"):
        Retry(5, error=42)  # type: ignore[arg-type]
