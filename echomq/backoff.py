"""Backoff policies: a pure curve from (policy, attempts) to a delay in milliseconds.

``delay_ms(("fixed", ms) | ("exponential", base, cap) | ("jitter", inner) | [ms, ...],
attempts)``; no clock, no I/O. A retry's delay priced here is handed to ``jobs.retry``.
"""

from __future__ import annotations

from echomq.core.backoff import (
    MAX_MS,
    MAX_STEPS,
    Policy,
    delay_ms,
    is_steps,
    normalize,
    validate,
)

__all__ = [
    "MAX_MS", "MAX_STEPS", "Policy", "delay_ms", "is_steps", "normalize", "validate",
]
