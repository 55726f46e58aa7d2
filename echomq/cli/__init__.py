"""The ``echomq`` command: ``main`` parses and dispatches, one module per command group."""

from echomq.cli.main import main

__all__ = ["main"]
