"""What several command groups share: argument types, the connection, common flags."""

from __future__ import annotations

import argparse


def port(text: str) -> int:
    """A TCP port argument (0..65535), refused by argparse (exit 2) otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value
