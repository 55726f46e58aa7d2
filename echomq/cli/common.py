"""What several command groups share: argument types, the connection, common flags."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from echomq.cli.main import default_url
from echomq.core.times import parse_duration, parse_instant


def port(text: str) -> int:
    """A TCP port argument (0..65535), refused by argparse (exit 2) otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def word_value(word: str) -> Any:
    """A task argument given as a word: the JSON value it parses as, else the string."""
    try:
        return json.loads(word)
    except ValueError:
        return word


def url_flag(p: argparse.ArgumentParser) -> None:
    """``--url``, which every command that talks to a server takes."""
    p.add_argument("--url", default=None, help="server URL (default: $ECHOMQ_URL, else embedded)")


def connect(args: argparse.Namespace) -> tuple[Any, Any]:
    """``(connector, app)``: the app owns the embedded server when no URL is given."""
    from echomq.tasks.app import App

    app = App(default_url(args.url))
    return app.connector(), app


def parse_kwargs(text: str | None) -> dict[str, Any]:
    """``--kwargs`` as a dict: a JSON object, refused in words otherwise."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--kwargs is not JSON ({exc.msg} at character {exc.pos}): "
                         f"write an object with double-quoted keys, e.g. "
                         "'{\"y\": 2}'") from None
    if not isinstance(value, dict):
        raise ValueError("--kwargs must be a JSON object, e.g. '{\"y\": 2}'")
    return value


def find_queue(conn: Any, job_id: str, declared: list[str] | None = None) -> str | None:
    """The queue holding ``job_id``'s row: the registered (and ``declared``) queues first,
    in one round trip; a scan for the others only when they miss."""
    from echomq.verbs import registry
    known: list[str] = registry.queues(conn, scan=False, declared=declared or [])
    found: str | None = registry.locate(conn, job_id, known)
    if found is None:
        rest = [q for q in scan_queues(conn) if q not in known]
        found = registry.locate(conn, job_id, rest)
    return found


def scan_queues(conn: Any, progress: bool = True, declared: list[str] | None = None
                ) -> list[str]:
    """Every queue: registered (``registry``) and found by scanning for EchoMQ sorted sets
    on every primary (a progress line on stderr when the scan runs longer than a second)."""
    from echomq.verbs import registry
    started, shown = time.monotonic(), False

    def report(scanned: int, found: int) -> None:
        nonlocal shown
        if progress and time.monotonic() - started > 1.0:
            print(f"\rscanning... {scanned} sets, {found} queues", end="",
                  file=sys.stderr, flush=True)
            shown = True

    names: list[str] = registry.queues(conn, scan=True, declared=declared or [],
                                       budget=10**12, progress=report)
    if shown:
        print(file=sys.stderr)
    return names


def until_type(text: str) -> tuple[str, int]:
    """``--until``'s value: ``("in", ms)`` for a duration (priced on the SERVER clock once
    connected), ``("at", epoch ms)`` for an instant."""
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*(ms|s|m|h|d)\s*", text):
        return ("in", parse_duration(text))
    return ("at", parse_instant(text))


def until_ms(conn: Any, until: tuple[str, int]) -> int:
    """An ``--until`` value as SERVER epoch ms (a duration counts from the server's now)."""
    from echomq.verbs import jobs

    mode, value = until
    return jobs.server_now_ms(conn) + value if mode == "in" else value
