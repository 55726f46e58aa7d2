"""``App``'s constructor keywords as one value, ``AppSettings``, checked once: the public
signature hands every keyword over (``AppKeywords``), a bad value raises before anything
is started or written, and the app reads what the value made."""

from __future__ import annotations

import datetime as dt
import inspect
import pathlib
from typing import Any

import pytest

from echomq import App, errors
from echomq.tasks.retrying import Retry
from echomq.tasks.settings import AppKeywords, AppSettings
from echomq.verbs.durability import Wait


def test_the_app_hands_every_keyword_of_its_signature_over() -> None:
    params = list(inspect.signature(App.__init__).parameters.values())[1:]  # less self
    assert [p.name for p in params] == list(AppKeywords.__annotations__)
    assert len(params) >= 27
    # the signature holds the defaults: an App made with none reads them
    app = App("valkey://127.0.0.1:1")
    assert app.settings.retry == Retry(10.0) and app.settings.timeout == 5.0
    assert app.settings.default_queue == "default" and app.settings.wait is None


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"recurrence_clock": "sundial"}, errors.ConfigError),
    ({"default_queue": ""}, ValueError),
    ({"wait_replicas": -1}, ValueError),
    ({"timeout": 0}, ValueError),
    ({"timeout": "5"}, TypeError),
    ({"retry_for": -1}, ValueError),
    ({"ephemeral": True, "durability": "always"}, errors.ConfigError),
    ({"durability": "sometimes"}, ValueError),
    ({"wire": 5}, ValueError),
    ({"max_payload_bytes": 0}, ValueError),
    ({"keep_errors": -1}, ValueError),
    ({"retention": None, "keep_completed": -1}, ValueError),
    ({"signal_ttl": -1}, ValueError),
])
def test_a_bad_keyword_raises_before_anything_is_started(
        tmp_path: pathlib.Path, kwargs: dict[str, Any], error: type[BaseException]) -> None:
    with pytest.raises(error):
        App(None, data_dir=tmp_path / "data", **kwargs)
    assert not (tmp_path / "data").exists()  # no embedded server was started there


def test_a_url_with_durability_is_refused_before_connecting() -> None:
    with pytest.raises(errors.ConfigError, match="durability is for the embedded server"):
        App("valkey://127.0.0.1:1", durability="always")  # nothing listens on port 1


def test_the_app_holds_the_checked_value_and_reads_it(tmp_path: pathlib.Path) -> None:
    app = App("valkeys://127.0.0.1:1", wait_replicas=1, wait_timeout_ms=250,
              timeout=dt.timedelta(milliseconds=1500), retry_for=dt.timedelta(seconds=3),
              keep_errors=2, signal_ttl=dt.timedelta(minutes=1), recurrence_clock="server",
              default_queue="mail", tls_verify="none", data_dir=tmp_path)
    s = app.settings
    assert isinstance(s, AppSettings)
    assert s.wait == Wait(replicas=1, timeout_ms=250) == app.wait
    assert s.timeout == 1.5 == app.timeout
    assert s.retry == Retry(3.0) == app.retry
    assert s.retention.keep_errors == 2 == app.retention.keep_errors
    assert s.signal_ttl_ms == 60_000 == app.signal_ttl_ms
    assert (s.recurrence_clock, s.default_queue) == ("server", "mail")
    assert s.tls == {"tls_verify": "none"} == app.tls
    assert s.data_dir == tmp_path == app.data_dir
    with pytest.raises(AttributeError):
        s.timeout = 9  # type: ignore[misc]  # frozen: made and checked once
    assert App("").settings.url is None  # an empty URL is no URL
