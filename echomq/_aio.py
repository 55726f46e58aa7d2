"""The runtime's one typing seam: a verb driven on an ``AsyncConnector`` returns an
awaitable, which the ``Maybe`` return type of the shared verbs cannot say on its own."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast


def aw(value: Any) -> Awaitable[Any]:
    """``value`` (a verb's result on an async connector) typed as the awaitable it is."""
    return cast(Awaitable[Any], value)
