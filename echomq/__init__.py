"""EchoMQ: a job queue on Valkey in which time is a control.

A schedule is a score on one sorted set, promoted on the server clock; a delay sends a job
in hand back to that schedule without touching its attempts; a backoff is a pure value; a
recurrence is a registration that mints a fresh, mint-ordered job for every occurrence.
"""

from __future__ import annotations

from echomq import native, scripts
from echomq.connectors.connector import AsyncConnector, Connector
from echomq.core import backoff, errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.runtime.consumer import Delay, RateLimited, current_job
from echomq.tasks.app import App
from echomq.verbs import groups, jobs, repeat
from echomq.verbs.jobs import Claim

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
