r"""Backoff: a pure curve from (policy, attempts) to a delay in milliseconds.

No process, no clock, no I/O (``jitter`` draws from ``random``, nothing else). A caller
that wants a retry curve computes the number here and hands it to ``jobs.retry``.

Policies:

- ``("fixed", ms)``: the same delay on every attempt.
- ``("exponential", base, cap)``: ``base * 2**(attempts-1)``, clamped at ``cap``.
- ``("jitter", inner)``: a uniform draw in ``0..delay_ms(inner, attempts)`` (full jitter).
- ``[1_000, 5_000, 30_000]``: a list of delays (ms, or ``timedelta``), one per retry in
  order; the last repeats for every retry after it (RQ's ``Retry(interval=[...])``). A
  tuple of the same (what a list becomes after a JSON round trip and ``tuple()``) is the
  same policy; ``normalize`` turns the ``timedelta``\ s into ms.

>>> delay_ms(("exponential", 100, 10_000), 1)
100
>>> delay_ms(("exponential", 100, 10_000), 3)
400
>>> delay_ms(("exponential", 100, 10_000), 20)
10000
>>> delay_ms(("fixed", 1000), 8)
1000
>>> 0 <= delay_ms(("jitter", ("fixed", 50)), 1) <= 50
True
>>> delays = [delay_ms([1_000, 5_000, 30_000], n) for n in (1, 2, 3, 4, 9)]
>>> delays
[1000, 5000, 30000, 30000, 30000]
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

# the longest delay a policy may price: 9999-12-31T23:59:59.999Z in epoch ms (as
# ``_guards.MAX_TIME_MS``; ``jobs.retry`` bounds the sum with now before any I/O)
MAX_MS = 253_402_300_799_999

Policy = tuple[Any, ...] | list[Any]

#: the most delays a list policy may name (a longer curve is a formula, not a list)
MAX_STEPS = 1_000

_rng = random.SystemRandom()


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_steps(policy: object) -> bool:
    """Whether ``policy`` is the list form (a list, or a tuple whose first item is a
    delay rather than a kind's name)."""
    if isinstance(policy, list):
        return True
    return (isinstance(policy, tuple) and bool(policy)
            and not isinstance(policy[0], str))


def _step_ms(i: int, value: object) -> int:
    if isinstance(value, dt.timedelta):
        ms = value // dt.timedelta(milliseconds=1)
    elif _int(value):
        ms = int(value)  # type: ignore[call-overload]
    else:
        raise TypeError(f"backoff list item {i} must be an int of ms or a timedelta, "
                        f"not {type(value).__name__}")
    if not 0 <= ms <= MAX_MS:
        raise ValueError(f"backoff list item {i} must be 0..{MAX_MS} ms, got {ms}")
    return ms


def validate(policy: Policy) -> Policy:
    """Return ``policy`` if it is well formed, else raise ``ValueError``/``TypeError``."""
    if is_steps(policy):
        if not policy:
            raise ValueError("a backoff list needs at least one delay ([1_000, 5_000, ...])")
        if len(policy) > MAX_STEPS:
            raise ValueError(f"a backoff list holds at most {MAX_STEPS} delays, "
                             f"not {len(policy)}")
        for i, step in enumerate(policy):
            _step_ms(i, step)
        return policy
    if not isinstance(policy, tuple) or not policy:
        raise TypeError(f"a backoff policy is a tuple or a list of delays, not {policy!r}")
    kind = policy[0]
    if kind == "fixed" and len(policy) == 2:
        if not _int(policy[1]) or not 0 <= policy[1] <= MAX_MS:
            raise ValueError(f"fixed backoff needs an int ms in 0..{MAX_MS}")
        return policy
    if kind == "exponential" and len(policy) == 3:
        base, cap = policy[1], policy[2]
        if not (_int(base) and 1 <= base <= MAX_MS and _int(cap) and 1 <= cap <= MAX_MS):
            raise ValueError(f"exponential backoff needs int base and cap in 1..{MAX_MS}")
        return policy
    if kind == "jitter" and len(policy) == 2:
        validate(policy[1])
        return policy
    raise ValueError(f"unknown backoff policy {policy!r}")


def normalize(policy: Policy) -> Policy:
    r"""``policy`` validated, with a list's delays as int ms (``timedelta``\ s converted)
    and a list given as a tuple made a list: the form a task keeps and shows."""
    validate(policy)
    if is_steps(policy):
        return [_step_ms(i, step) for i, step in enumerate(policy)]
    if policy[0] == "jitter":
        return ("jitter", normalize(policy[1]))
    return policy


def delay_ms(policy: Policy, attempts: int) -> int:
    """The delay in ms before retry number ``attempts`` (1-based) under ``policy``."""
    if not _int(attempts) or attempts < 1:
        raise ValueError("attempts must be an int >= 1")
    validate(policy)
    return _delay(policy, attempts)


def _delay(policy: Policy, attempts: int) -> int:
    if is_steps(policy):
        return _step_ms(0, policy[min(attempts, len(policy)) - 1])
    kind = policy[0]
    if kind == "fixed":
        return int(policy[1])
    if kind == "exponential":
        base, cap = policy[1], policy[2]
        # Once the shift passes the cap's bit length the product only grows: clamp early so
        # a huge attempts count never builds a huge integer.
        if attempts - 1 >= cap.bit_length():
            return int(cap)
        return int(min(base << (attempts - 1), cap))
    bound = _delay(policy[1], attempts)
    return 0 if bound <= 0 else _rng.randint(0, bound)
