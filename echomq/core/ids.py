"""Branded job ids: ``JOB`` + a 26-character Crockford base32 ULID.

A ULID is a 48-bit millisecond timestamp followed by 80 random bits, written most
significant first in an alphabet whose byte order is its numeric order. So the byte
order of two ids is the order they were minted in: across milliseconds by the
timestamp, and within one millisecond in one process because the random part is
incremented rather than redrawn (monotonic ULID). The pending set stores ids at score 0,
where Valkey orders members by bytes, so claim order is mint order.

``mint`` reads the host's wall clock (``time.time_ns``).
"""

from __future__ import annotations

import os
import threading
import time

PREFIX = "JOB"
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DECODE = {c: i for i, c in enumerate(ALPHABET)}
_RANDOM_MAX = (1 << 80) - 1

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


# every 10-bit value as its two characters: an id is 13 lookups instead of 26 shifts
_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]


def _encode(value: int) -> str:
    p = _PAIRS
    return "".join((
        p[value >> 120 & 1023], p[value >> 110 & 1023], p[value >> 100 & 1023],
        p[value >> 90 & 1023], p[value >> 80 & 1023], p[value >> 70 & 1023],
        p[value >> 60 & 1023], p[value >> 50 & 1023], p[value >> 40 & 1023],
        p[value >> 30 & 1023], p[value >> 20 & 1023], p[value >> 10 & 1023],
        p[value & 1023],
    ))


def _next(now_ms: int) -> tuple[int, int]:
    global _last_ms, _last_rand
    with _lock:
        if now_ms <= _last_ms:
            # Same (or a stepped-back) millisecond: keep the last timestamp and bump the
            # random part, so byte order stays mint order even if the host clock moves back.
            now_ms = _last_ms
            rand = _last_rand + 1
            if rand > _RANDOM_MAX:  # 2^80 ids in one ms: borrow the next millisecond
                now_ms += 1
                rand = int.from_bytes(os.urandom(10), "big") >> 1
        else:
            # Keep a clear bit at the top so the increments above have room.
            rand = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms, _last_rand = now_ms, rand
        return now_ms, rand


def mint() -> str:
    """A fresh id, ``JOB`` + ULID, strictly greater than every id minted before in this process."""
    ms, rand = _next(time.time_ns() // 1_000_000)
    return PREFIX + _encode((ms << 80) | rand)


def mint_at(ms: int) -> str:
    """An id whose timestamp part is ``ms`` (for tests and tooling; not monotonic)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms < (1 << 48):
        raise ValueError("ms must be an int in [0, 2**48)")
    return PREFIX + _encode((ms << 80) | (int.from_bytes(os.urandom(10), "big") >> 1))


def is_job_id(value: object) -> bool:
    """True for a well-formed branded id (``JOB`` + 26 Crockford base32 characters)."""
    return (
        isinstance(value, str)
        and len(value) == 29
        and value.startswith(PREFIX)
        and all(c in _DECODE for c in value[3:])
        and value[3] in "01234567"
    )


def parse(job_id: str) -> tuple[int, int]:
    """Split a branded id into ``(timestamp_ms, random80)``; ``ValueError`` if malformed."""
    if not is_job_id(job_id):
        raise ValueError(f"not a branded job id: {job_id!r}")
    value = 0
    for c in job_id[3:]:
        value = (value << 5) | _DECODE[c]
    return value >> 80, value & _RANDOM_MAX


def timestamp_ms(job_id: str) -> int:
    """The host-clock millisecond the id was minted at."""
    return parse(job_id)[0]
