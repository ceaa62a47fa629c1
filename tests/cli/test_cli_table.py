"""The command table: every listed command has its module, and ``--help`` lists them all."""

from __future__ import annotations

import argparse
import importlib.util

import pytest

from streamseg.cli import BENCH_COMMANDS, COMMANDS, build_parser


@pytest.mark.parametrize(
    "module", sorted(m for m, _ in [*COMMANDS.values(), *BENCH_COMMANDS.values()])
)
def test_every_command_module_exists(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{module} is listed in streamseg.cli but does not exist"


def test_parser_offers_every_command() -> None:
    parser = build_parser([])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {*COMMANDS, "bench"}
    bench = sub.choices["bench"]
    bench_sub = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction))
    assert set(bench_sub.choices) == set(BENCH_COMMANDS)
