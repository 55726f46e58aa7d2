"""Errors: every refusal from the server or a guard, all under ``EchoMQError``.

``KindError`` (EMQKIND), ``StaleError`` (EMQSTALE) and its ``GoneError``, ``StateError``
(EMQSTATE) keep the server's text as ``str(exc)``; ``Unavailable`` and its subclasses mean
the server refused for now and wrote nothing; ``JobFailed``, ``JobCancelled``,
``JobExpired`` and ``JobNotFound`` are what ``App.result`` raises for a job's end.
"""

from __future__ import annotations

from echomq.core.errors import (
    Busy,
    CommandError,
    ConfigError,
    CrossSlotError,
    EchoMQError,
    GoneError,
    JobCancelled,
    JobExpired,
    JobFailed,
    JobNotFound,
    KindError,
    Loading,
    Misconf,
    NativeUnavailable,
    NoPermission,
    NoScript,
    NotDurable,
    OutOfMemory,
    PayloadTooLarge,
    ReadOnly,
    ServerError,
    SignalTimeout,
    StaleError,
    StateError,
    TryAgain,
    Unavailable,
    WireError,
    from_server,
)

__all__ = [
    "Busy", "CommandError", "ConfigError", "CrossSlotError", "EchoMQError", "GoneError",
    "JobCancelled", "JobExpired", "JobFailed", "JobNotFound", "KindError", "Loading",
    "Misconf", "NativeUnavailable", "NoPermission", "NoScript", "NotDurable", "OutOfMemory",
    "PayloadTooLarge", "ReadOnly", "ServerError", "SignalTimeout", "StaleError", "StateError",
    "TryAgain",
    "Unavailable", "WireError", "from_server",
]
