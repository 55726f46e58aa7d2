"""Job ids: ``JOB`` + a 26-character ULID whose byte order is mint order.

``mint`` reads the host's wall clock; ``timestamp_ms`` reads an id's minting instant back.
"""

from __future__ import annotations

from echomq.core.ids import (
    ALPHABET,
    PREFIX,
    is_job_id,
    mint,
    mint_at,
    parse,
    timestamp_ms,
)

__all__ = [
    "ALPHABET", "PREFIX", "is_job_id", "mint", "mint_at", "parse", "timestamp_ms",
]
