"""``streamseg weights list | get NAME | verify PATH``: published checkpoints by name.

* ``list``: the catalogue (name, architecture, classes, URL, size, sha256,
  licence) and whether each file is in the cache;
* ``get NAME``: download into the cache (``$STREAMSEG_WEIGHTS_DIR`` or
  ``~/.cache/streamseg/weights``), resuming a partial download, checking
  the sha256 before the file takes its place; prints the path;
* ``verify PATH``: hash a file and compare it with its catalogue entry
  (found by ``--name``, by file name, or by hash); ``--load`` also loads it
  with the entry's architecture.

Exit codes: 0 done / verified; 1 the download or the check failed (HTTP
error, unreachable server, interrupted transfer, hash mismatch, a file the
catalogue does not know); 2 bad usage (unknown name, a missing file, an
entry without a hash and no ``--allow-unverified``, and with ``--load`` a
file that does not load: the same explanation ``serve`` gives for it).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from streamseg.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from streamseg.models.weights import WeightsEntry

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--catalogue",
        metavar="FILE",
        help="a catalogue JSON file to use instead of the shipped one "
        "(default $STREAMSEG_WEIGHTS_CATALOGUE, else the package's)",
    )
    sub = parser.add_subparsers(dest="weights_command", metavar="ACTION")
    ls = sub.add_parser("list", help="the catalogue and what is cached")
    ls.add_argument("--json", action="store_true", help="one JSON object per entry")
    get = sub.add_parser("get", help="download NAME into the cache")
    get.add_argument("name", metavar="NAME")
    get.add_argument(
        "--dir",
        type=Path,
        help="cache folder (default $STREAMSEG_WEIGHTS_DIR or ~/.cache/streamseg/weights)",
    )
    get.add_argument(
        "--allow-unverified",
        action="store_true",
        help="download an entry that has no sha256 in the catalogue (its digest is printed)",
    )
    get.add_argument("--no-progress", action="store_true", help="no progress bar")
    get.add_argument("--timeout", type=float, default=30.0, help="network timeout, seconds")
    verify = sub.add_parser("verify", help="check a file's sha256 against the catalogue")
    verify.add_argument("path", metavar="PATH", type=Path)
    verify.add_argument("--name", help="the entry to check against (default: by file name or hash)")
    verify.add_argument(
        "--load", action="store_true", help="also load it with the entry's architecture"
    )
    parser.set_defaults(_weights_help=parser.print_help)
    parser.epilog = (
        "exit codes: 0 ok, 1 download or check failed, 2 bad usage or a file that does not load"
    )


def run(args: argparse.Namespace) -> int:
    from streamseg.models.weights import CatalogueError, load_catalogue

    try:
        catalogue = load_catalogue(args.catalogue)
    except CatalogueError as exc:
        raise UsageError(str(exc)) from None
    if args.weights_command == "list":
        return _list(catalogue, as_json=args.json)
    if args.weights_command == "get":
        return _get(_entry(catalogue, args.name), args)
    if args.weights_command == "verify":
        return _verify(catalogue, args)
    args._weights_help()
    raise UsageError("choose an action: list, get NAME or verify PATH")


def _entry(catalogue: dict[str, WeightsEntry], name: str) -> WeightsEntry:
    if name in catalogue:
        return catalogue[name]
    close = difflib.get_close_matches(name, list(catalogue), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(
        f"no weights named {name!r} in the catalogue; {hint}`streamseg weights list` shows them"
    )


def _size(entry: WeightsEntry) -> str:
    return f"{entry.size / 2**20:.1f} MiB ({entry.size} bytes)" if entry.size else "unknown"


def _sha(entry: WeightsEntry) -> str:
    if entry.sha256 is None:
        return "none published (get needs --allow-unverified)"
    return entry.sha256 if entry.full_hash else f"{entry.sha256}... (published prefix only)"


def _list(catalogue: dict[str, WeightsEntry], *, as_json: bool) -> int:
    import dataclasses

    from streamseg.models.weights import cached_file

    for entry in catalogue.values():
        path = cached_file(entry)
        cached = path.is_file()
        if as_json:
            row = dataclasses.asdict(entry) | {"cached": cached, "path": str(path)}
            print(json.dumps(row))
            continue
        print(f"{entry.name}{'  [cached]' if cached else ''}")
        print(f"  arch     {entry.arch} (classes: {entry.classes}, task: {entry.task})")
        print(f"  url      {entry.url}")
        print(f"  size     {_size(entry)}")
        print(f"  sha256   {_sha(entry)}")
        print(f"  licence  {entry.licence}")
    return EXIT_OK


def _get(entry: WeightsEntry, args: argparse.Namespace) -> int:
    from streamseg.models.download import DownloadError, UnverifiedError, fetch

    try:
        path = fetch(
            entry,
            directory=args.dir,
            allow_unverified=args.allow_unverified,
            progress=not args.no_progress,
            timeout=args.timeout,
        )
    except UnverifiedError as exc:
        raise UsageError(str(exc)) from None
    except DownloadError as exc:
        print(f"streamseg: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(path)
    return EXIT_OK


def _verify(catalogue: dict[str, WeightsEntry], args: argparse.Namespace) -> int:
    from streamseg.models.weights import sha256_file

    path: Path = args.path
    if not path.is_file():
        raise UsageError(f"{path} is not a file")
    digest, size = sha256_file(path), path.stat().st_size
    if args.name:
        entry: WeightsEntry | None = _entry(catalogue, args.name)
    else:
        entry = next((e for e in catalogue.values() if e.filename == path.name), None) or next(
            (e for e in catalogue.values() if e.hash_matches(digest)), None
        )
    print(f"{path}: sha256 {digest}, {size} bytes")
    if entry is None:
        print(f"{path}: not in the catalogue (no entry has its name or hash)", file=sys.stderr)
        return EXIT_FAILURE
    problem = _mismatch(entry, digest, size)
    if problem:
        print(f"{path}: MISMATCH with {entry.name}: {problem}", file=sys.stderr)
        return EXIT_FAILURE
    extent = "" if entry.full_hash else f" (its published {len(entry.sha256 or '')}-digit prefix)"
    print(f"{path}: OK: {entry.name}{extent}")
    return _load(path, entry) if args.load else EXIT_OK


def _mismatch(entry: WeightsEntry, digest: str, size: int) -> str | None:
    if entry.sha256 is None:
        return "the catalogue has no sha256 for it, so it cannot be verified"
    if entry.size is not None and size != entry.size:
        return f"{size} bytes, the catalogue says {entry.size}"
    if not entry.hash_matches(digest):
        return f"sha256 {digest}, the catalogue says {_sha(entry)}"
    return None


def _load(path: Path, entry: WeightsEntry) -> int:
    from streamseg.models import class_options
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment.loading import load_model

    names = entry.class_names()
    options = class_options(entry.arch, names) if names is not None else {}
    try:
        _, classes = load_model(entry.arch, str(path), options)
    except CheckpointError as exc:  # what serve says of the same file
        print(f"streamseg: error: {path}: does not load as {entry.arch}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{path}: loads as {entry.arch} ({len(classes) - 1} classes)")
    return EXIT_OK
