"""EchoMQ: a job queue on Valkey in which time is a control.

A schedule is a score on one sorted set, promoted on the server clock; a delay sends a job
in hand back to that schedule without touching its attempts; a backoff is a pure value; a
recurrence is a registration that mints a fresh, mint-ordered job for every occurrence.

The package's folders are its layers, imports flowing down only (checked by import-linter):
``cli`` and ``dashboard`` > ``tasks`` > ``embedded`` | ``runtime`` > ``verbs`` |
``connectors`` > ``core``. Everything a user needs is importable from here.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from echomq import _moved, native, scripts
from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.connector import Connector
from echomq.core import backoff, errors, ids, keyspace
from echomq.core.outcomes import Outcome
from echomq.embedded.cluster import LocalCluster
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.runtime.handler import Delay, Fail, Job, RateLimited, Retry, current_job
from echomq.runtime.pump import Pump
from echomq.tasks.app import App
from echomq.tasks.canvas import chain, flow, group
from echomq.tasks.worker import Worker
from echomq.verbs import dead, flows, groups, jobs, repeat
from echomq.verbs.jobs import Claim

# The verb modules' public names are module paths too (`from echomq.errors import KindError`,
# `import echomq.jobs`): the same module objects, not copies.
for _name in ("backoff", "errors", "ids", "keyspace", "dead", "flows", "groups", "jobs",
              "repeat"):
    sys.modules.setdefault(f"echomq.{_name}", globals()[_name])
del _name
_moved.install()

__all__ = [
    "App",
    "AsyncConnector",
    "Claim",
    "Connector",
    "Consumer",
    "Delay",
    "EmbeddedServer",
    "Fail",
    "Job",
    "LocalCluster",
    "Outcome",
    "Pump",
    "RateLimited",
    "Retry",
    "Worker",
    "backoff",
    "chain",
    "current_job",
    "dead",
    "errors",
    "flow",
    "flows",
    "group",
    "groups",
    "ids",
    "jobs",
    "keyspace",
    "native",
    "repeat",
    "scripts",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``echomq.worker`` and the other module paths from before the layout move (warned)."""
    if f"echomq.{name}" in _moved.MOVED:
        return importlib.import_module(f"echomq.{name}")
    raise AttributeError(f"module 'echomq' has no attribute {name!r}")
