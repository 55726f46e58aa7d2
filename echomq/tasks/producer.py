"""``Producer``: what a ``Task`` and a flow need from the app that admits their runs.

``App`` is one. A task makes a ``Plan`` (``echomq.tasks.admission``: the steps of one
admission verb, checked) and hands it to ``submit`` (a sync ``Connector``) or ``asubmit``
(the running loop's ``AsyncConnector``): the producer drives the same steps on either,
under its durability wait, and registers the plan's queues once admitted (a refused
admission writes nothing, the queue registry included).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

from echomq.connectors.aconnector import AsyncConnector
from echomq.connectors.connector import Connector
from echomq.core.payload import Format
from echomq.tasks.admission import Plan

T = TypeVar("T")


class Producer(Protocol):
    """The app side of a task: connectors, plan submission, the payload limit, and how
    many partitions a queue of the app has."""

    @property
    def max_payload_bytes(self) -> int: ...

    @property
    def format(self) -> Format:
        """How payloads are written: the app's serializer and codec."""
        ...

    def connector(self, queue: str | None = None) -> Connector: ...

    async def aconnector(self, queue: str | None = None) -> AsyncConnector: ...

    def submit(self, plan: Plan[T]) -> T:
        """Drive ``plan`` on the sync connector: its answer (a job id)."""
        ...

    def asubmit(self, plan: Plan[T]) -> Awaitable[T]:
        """``submit`` on the running loop's async connector, awaited."""
        ...

    def partitions_of(self, queue: str) -> int:
        """How many partitions ``queue`` has for this app (1 unless a task declared
        more)."""
        ...
