"""``AppSettings``: an ``App``'s constructor keywords as one value, checked once.

``App(url, timeout=..., retry_for=..., ...)`` hands its keywords, as given, to
``AppSettings.of``, which checks every one of them (the same errors, in the same order,
as before: nothing is connected, started or written until they all pass) and turns them
into what the app uses: a ``Wait`` from the ``wait_*`` keywords, a ``Retry`` from
``retry_for``, the TLS options, a ``Retention`` from the ``keep_*`` keywords, a payload
``Format`` from ``serializer``/``codec``, ``signal_ttl`` in ms. ``App`` (and the
``Client`` under it) hold the value as ``app.settings`` and read their starting
attributes from it; the keywords' meaning is documented on ``App`` and ``Client``.

Units as the app's: ``timeout``, ``retry_for`` and ``signal_ttl`` are seconds as a bare
number (or a ``timedelta``), ``wait_timeout_ms`` and ``keep_completed_for`` milliseconds.
No clock, no I/O.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict

from echomq.connectors import urls
from echomq.connectors.plan import check_payload_limit, check_wire, tls_options
from echomq.core import codecs, keyspace
from echomq.core import guards as guard
from echomq.core.errors import ConfigError
from echomq.core.payload import PLAIN, Format, Serializer
from echomq.core.times import seconds_to_ms
from echomq.embedded.launch import check_durability
from echomq.runtime.events import Observer
from echomq.tasks.lifecycle import Hook
from echomq.tasks.retrying import Retry
from echomq.verbs.durability import Wait
from echomq.verbs.retention import Retention
from echomq.verbs.retention import resolve as resolve_retention

DEFAULT_QUEUE = "default"
RECURRENCE_CLOCKS = ("host", "server")


TLS_KEYWORDS: tuple[Literal["tls_ca", "tls_cert", "tls_key", "tls_verify"], ...] = (
    "tls_ca", "tls_cert", "tls_key", "tls_verify")


class AppKeywords(TypedDict):
    """``App``'s keywords as given, every one (``App.__init__`` holds their defaults and
    hands them over as they are; ``App`` and ``Client`` document their meaning)."""

    url: str | None
    wire: int | None
    data_dir: str | os.PathLike[str] | None
    ephemeral: bool
    default_queue: str
    retention: Retention | None
    keep_completed: int | None
    keep_completed_for: int | dt.timedelta | None
    on_event: Observer | None
    durability: str | None
    max_payload_bytes: int
    wait_replicas: int
    wait_local: bool
    wait_timeout_ms: int
    tls_ca: str | os.PathLike[str] | None
    tls_cert: str | os.PathLike[str] | None
    tls_key: str | os.PathLike[str] | None
    tls_verify: str | None
    recurrence_clock: str
    keep_errors: int | None
    on_startup: Hook | None
    on_shutdown: Hook | None
    signal_ttl: float | dt.timedelta
    codec: Any
    serializer: Serializer | None
    timeout: float | dt.timedelta | None
    retry_for: float | dt.timedelta | None


@dataclass(frozen=True, slots=True)
class AppSettings:
    """One app's checked settings (``AppSettings.of``; see the module doc). ``url``:
    ``None`` until the first use finds one (``$ECHOMQ_URL`` or the embedded server);
    ``wire``: the wire asked for, ``None`` to let the first connect pick; ``wait``: what
    every admission waits for, if anything; ``tls``: the TLS keyword arguments every
    connection is made with; ``format``: how payloads and kept results are written."""

    url: str | None
    wire: int | None
    data_dir: pathlib.Path | None
    ephemeral: bool
    durability: str | None
    max_payload_bytes: int
    wait: Wait | None
    tls: dict[str, Any]
    timeout: float | None
    retry: Retry
    default_queue: str
    recurrence_clock: str
    signal_ttl_ms: int
    retention: Retention
    on_event: Observer | None
    on_startup: Hook | None
    on_shutdown: Hook | None
    format: Format

    @classmethod
    def of(cls, given: AppKeywords) -> AppSettings:
        """``App``'s keywords as given (its signature holds their defaults), checked, all
        of them, before the app does anything: a bad one raises here."""
        g = given
        keyspace.validate_queue(g["default_queue"])
        if g["recurrence_clock"] not in RECURRENCE_CLOCKS:
            raise ConfigError(f"recurrence_clock must be 'host' or 'server', "
                              f"not {g['recurrence_clock']!r}")
        wait = (Wait(g["wait_replicas"], g["wait_local"], g["wait_timeout_ms"])
                if g["wait_replicas"] or g["wait_local"] else None)
        timeout, retry = check_timeout(g["timeout"]), Retry.of(g["retry_for"])
        url = urls.given(g["url"])  # App("") (an empty $ECHOMQ_URL passed on) is no URL
        tls: dict[str, Any] = {k: os.fspath(v) for k in TLS_KEYWORDS if (v := g[k]) is not None}
        if url is not None:  # a bad setting is refused here, before any I/O
            tls_options(urls.parse(url), dict(tls))
        durability = check_durability(g["durability"])
        if g["ephemeral"] and durability is not None:
            raise ConfigError("an ephemeral server keeps nothing: durability does not apply")
        if url is not None and durability is not None:
            raise ConfigError("durability is for the embedded server; the server at the URL "
                              "keeps its own appendfsync setting")
        max_payload_bytes = check_payload_limit(g["max_payload_bytes"])
        wire = None if g["wire"] is None else check_wire(g["wire"])
        signal_ttl_ms = seconds_to_ms("signal_ttl", g["signal_ttl"]) or 0
        kept = resolve_retention(g["retention"], g["keep_completed"], g["keep_completed_for"])
        if g["keep_errors"] is not None:  # else the retention's own (10 by default)
            kept = replace(kept, keep_errors=guard.non_negative("keep_errors",
                                                                g["keep_errors"]))
        codec, serializer = g["codec"], g["serializer"]
        return cls(
            url=url, wire=wire, ephemeral=g["ephemeral"], durability=durability,
            data_dir=pathlib.Path(g["data_dir"]) if g["data_dir"] is not None else None,
            max_payload_bytes=max_payload_bytes, wait=wait, tls=tls, timeout=timeout,
            retry=retry, default_queue=g["default_queue"],
            recurrence_clock=g["recurrence_clock"], signal_ttl_ms=signal_ttl_ms,
            retention=kept, on_event=g["on_event"], on_startup=g["on_startup"],
            on_shutdown=g["on_shutdown"],
            format=(PLAIN if codec is None and serializer is None
                    else Format(serializer, codecs.of(codec))))

def check_timeout(timeout: object) -> float | None:
    """``App(timeout=)``: seconds > 0 (a number or a ``timedelta``), or ``None`` for no
    socket timeout at all (a dead server then hangs the call)."""
    if timeout is None:
        return None
    if isinstance(timeout, dt.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be seconds or a timedelta, not {type(timeout).__name__}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
    return float(timeout)
