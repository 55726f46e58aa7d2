"""The ``echomq`` command line. Each command group lives in ``echomq.commands.<name>`` and
exposes ``register(subparsers)``; a group that fails to import is reported, not fatal."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

GROUPS = ("server", "demo", "worker", "jobs", "control", "repeat", "dashboard", "cluster")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="echomq", description="EchoMQ: a job queue on Valkey in which time is a control."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        try:
            module = importlib.import_module(f"echomq.commands.{group}")
        except ModuleNotFoundError as exc:
            if exc.name == f"echomq.commands.{group}":
                continue
            raise
        module.register(sub)
    return parser


def default_url(explicit: str | None) -> str | None:
    """``--url``, else ``$ECHOMQ_URL``, else ``None`` (the embedded server)."""
    return explicit or os.environ.get("ECHOMQ_URL") or None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
