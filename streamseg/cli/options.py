"""The options several commands share, added by one helper each.

``PIPELINE`` (the positional of ``serve``, ``check``, ``bench pipeline``, ...),
``--arch`` (the registry's architectures), ``--device`` and ``--precision``
(the registry's precisions): a command adds them here, so that their
choices, defaults and spelling are the same everywhere; it may word the help
for what it does with them.
"""

from __future__ import annotations

import argparse

from streamseg.models import ARCHITECTURES, PRECISIONS

__all__ = ["add_arch", "add_device", "add_pipeline", "add_precision"]


def add_pipeline(parser: argparse.ArgumentParser, help: str = "path of a pipeline.yaml") -> None:
    """The positional ``PIPELINE``."""
    parser.add_argument("pipeline", metavar="PIPELINE", help=help)


def add_arch(
    parser: argparse.ArgumentParser,
    *,
    default: str | None = None,
    required: bool = False,
    help: str = "model architecture",
) -> None:
    """``--arch``, one of the registered architectures."""
    parser.add_argument(
        "--arch", default=default, required=required, choices=tuple(ARCHITECTURES), help=help
    )


def add_device(parser: argparse.ArgumentParser, help: str = "cpu, cuda or cuda:N") -> None:
    """``--device``, ``cpu`` by default."""
    parser.add_argument("--device", default="cpu", help=help)


def add_precision(parser: argparse.ArgumentParser) -> None:
    """``--precision``, one of the registered precisions, ``fp32`` by default."""
    parser.add_argument("--precision", default="fp32", choices=tuple(PRECISIONS))
