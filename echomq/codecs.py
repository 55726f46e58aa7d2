"""Payload codecs for ``App(codec=...)``: ``Zlib()``, ``Fernet(keys=[new, old])`` and
``chain(...)``; ``Sealed`` is what reading an encrypted payload without its key raises."""

from __future__ import annotations

from echomq.core.codecs import (
    MAGIC,
    Chain,
    Codec,
    Fernet,
    Sealed,
    Zlib,
    chain,
    header,
    key_id,
    of,
    sealed,
    shown,
    unseal,
)

__all__ = [
    "MAGIC", "Chain", "Codec", "Fernet", "Sealed", "Zlib", "chain", "header", "key_id", "of",
    "sealed", "shown", "unseal",
]
