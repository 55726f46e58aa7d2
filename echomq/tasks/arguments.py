"""Arguments checked at enqueue: a call that cannot bind to the task's function is refused
with a ``TypeError`` before anything is written (Celery's ``check_arguments``).

Without it, ``send_email.enqueue("only-one-arg")`` is admitted and fails on the worker with
``missing 1 required positional argument`` on every attempt until it is dead. The check is
``inspect.Signature.bind`` on the function's signature, with a fast path for the common
call (positional arguments only, a function with plain parameters): a length test. A task
declared ``check_args=False`` skips it (a function whose signature lies, e.g. a wrapper
taking ``*args`` that a decorator hides). Pure: no I/O.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any


class Binder:
    """Checks calls of ``fn`` (``check``); a function without a readable signature
    accepts every call."""

    __slots__ = ("high", "low", "name", "short", "signature")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.short = str(getattr(fn, "__name__", name))
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin or extension without one
            self.signature = None
        # the fast path's bounds on a positional-only call: None when a keyword-only
        # parameter is required (every positional call then needs the full bind)
        self.low: int | None = 0
        self.high: float = 0
        if self.signature is None:
            return
        for p in self.signature.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                self.high += 1
                if p.default is p.empty and self.low is not None:
                    self.low += 1
            elif p.kind is p.VAR_POSITIONAL:
                self.high = float("inf")
            elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
                self.low = None

    def check(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """``TypeError`` naming the task and its signature when ``args``/``kwargs`` do not
        bind to the function; nothing otherwise."""
        sig = self.signature
        if sig is None:
            return
        if not kwargs and self.low is not None and self.low <= len(args) <= self.high:
            return
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            bare = sig.replace(parameters=[p.replace(annotation=p.empty)
                                           for p in sig.parameters.values()],
                               return_annotation=sig.empty)
            raise TypeError(f"{self.name}: {exc}: the function is {self.short}{bare} "
                            "(nothing was queued; @app.task(check_args=False) turns this "
                            "check off)") from None


def argument_picker(fn: Callable[..., Any], name: str) -> Callable[..., str | None]:
    """``@app.task(group_by="tenant_id")``: a function of a call's arguments giving that
    argument (after the defaults) as text, ``None`` when it is ``None``. ``TypeError`` at
    declaration when ``fn`` has no parameter ``name``."""
    sig = inspect.signature(fn)
    if name not in sig.parameters:
        raise TypeError(f"group_by={name!r}: {getattr(fn, '__name__', fn)} has no parameter "
                        f"{name!r} (its parameters: {', '.join(sig.parameters) or 'none'})")
    index = list(sig.parameters).index(name)
    ahead = list(sig.parameters.values())[:index + 1]
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in ahead)

    def pick(*args: Any, **kwargs: Any) -> str | None:
        if plain and index < len(args):  # the common call: positional, no bind needed
            value = args[index]
        else:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            value = bound.arguments[name]
        return None if value is None else str(value)

    return pick
