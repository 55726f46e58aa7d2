"""The repository's root, for the tests that read its files (README, docs, examples): one
place that knows how deep the tests sit."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
