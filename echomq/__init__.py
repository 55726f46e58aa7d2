"""EchoMQ: a job queue on Valkey in which time is a control.

A schedule is a score on one sorted set, promoted on the server clock; a delay sends a job
in hand back to that schedule without touching its attempts; a backoff is a pure value; a
recurrence is a registration that mints a fresh, mint-ordered job for every occurrence.

This package is the public face: the names below and the modules beside this file
(``echomq.jobs``, ``echomq.errors``, ...), each a plain module that re-exports, under an
explicit ``__all__``, what its private layer defines. The layers are the folders, imports
flowing down only (checked by import-linter): ``cli`` and ``dashboard`` > ``tasks`` >
``embedded`` | ``runtime`` > ``verbs`` | ``connectors`` > ``core``; no layer imports the face.
"""

from __future__ import annotations

from echomq import (
    backoff,
    codecs,
    dead,
    doctor,
    errors,
    flows,
    groups,
    ids,
    jobs,
    keyspace,
    native,
    payload,
    repeat,
    scripts,
    serializers,
    taskmetrics,
    workers,
)
from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.connector import Connector
from echomq.core.outcomes import Outcome
from echomq.embedded.cluster import LocalCluster
from echomq.embedded.server import EmbeddedServer
from echomq.runtime.consumer import Consumer
from echomq.runtime.events import Event
from echomq.runtime.handler import Delay, Fail, Job, RateLimited, Retry, current_job
from echomq.runtime.metronome import Metronome
from echomq.runtime.pump import Pump
from echomq.tasks.app import App
from echomq.tasks.canvas import chain, flow, group
from echomq.tasks.worker import Worker, run_worker
from echomq.verbs.batches import BatchInfo
from echomq.verbs.jobs import Claim
from echomq.verbs.retention import Retention
from echomq.verbs.status import JobInfo

__all__ = [
    "App",
    "AsyncConnector",
    "BatchInfo",
    "Claim",
    "Connector",
    "Consumer",
    "Delay",
    "EmbeddedServer",
    "Event",
    "Fail",
    "Job",
    "JobInfo",
    "LocalCluster",
    "Metronome",
    "Outcome",
    "Pump",
    "RateLimited",
    "Retention",
    "Retry",
    "Worker",
    "backoff",
    "chain",
    "codecs",
    "current_job",
    "dead",
    "doctor",
    "errors",
    "flow",
    "flows",
    "group",
    "groups",
    "ids",
    "jobs",
    "keyspace",
    "native",
    "payload",
    "repeat",
    "run_worker",
    "scripts",
    "serializers",
    "taskmetrics",
    "workers",
]

__version__ = "0.1.0"
