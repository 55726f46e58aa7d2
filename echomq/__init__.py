"""EchoMQ: a job queue on Valkey in which time is a control.

A schedule is a score on one sorted set, promoted on the server clock; a delay sends a job
in hand back to that schedule without touching its attempts; a backoff is a pure value; a
recurrence is a registration that mints a fresh, mint-ordered job for every occurrence.
"""

from __future__ import annotations

from . import backoff, errors, groups, ids, jobs, keyspace, native, repeat, scripts
from .app import App
from .connector import AsyncConnector, Connector
from .consumer import Delay, RateLimited, current_job
from .jobs import Claim
from .outcomes import Outcome

__all__ = [
    "App",
    "AsyncConnector",
    "Claim",
    "Connector",
    "Delay",
    "Outcome",
    "RateLimited",
    "backoff",
    "current_job",
    "errors",
    "groups",
    "ids",
    "jobs",
    "keyspace",
    "native",
    "repeat",
    "scripts",
]

__version__ = "0.1.0"
