"""The command table: every command word is its own module, imported by name, and every
command a person can type runs something."""

from __future__ import annotations

import argparse
import importlib

# the module, not the function echomq.cli re-exports under the same name
cli_main = importlib.import_module("echomq.cli.main")
Parser = argparse.ArgumentParser


def _leaves(parser: Parser, path: str) -> list[tuple[str, Parser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, parser)]
    out = []
    if parser.get_default("func") is not None:  # runs on its own too (`echomq workers`)
        out.append((path, parser))
    for name, child in subs[0].choices.items():
        out += _leaves(child, f"{path} {name}")
    return out


def test_every_command_word_is_a_module_of_that_name():
    words = next(a for a in cli_main.build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)).choices
    assert [m.__name__.rsplit(".", 1)[1] for m in cli_main.COMMANDS] == list(words)


def test_every_command_runs_something():
    leaves = _leaves(cli_main.build_parser(), "echomq")
    assert len(leaves) > 30
    missing = [path for path, p in leaves if not callable(p.get_default("func"))]
    assert missing == []
