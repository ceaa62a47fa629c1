"""The weights catalogue: published checkpoints by name, the local cache, and hash checks.

``catalogue.json`` (shipped in this package) is the one list of checkpoints
``streamseg weights`` knows; ``$STREAMSEG_WEIGHTS_CATALOGUE`` points at
another file of the same form instead (a mirror, or a test's loopback
server). Each entry is a :class:`WeightsEntry`. A downloaded file lives at
``cache_dir() / entry.filename``; ``cache_dir()`` is
``$STREAMSEG_WEIGHTS_DIR`` or ``~/.cache/streamseg/weights``.

``model.weights`` in pipeline.yaml may be an entry's name: :func:`lookup`
tells a name from a path, and :func:`cached_file` says where its file is.
Downloading is :mod:`streamseg.models.download`'s; nothing here touches the
network.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from streamseg.models import ARCHITECTURES, TASKS, task_problem
from streamseg.registry import load

__all__ = [
    "CACHE_ENV",
    "CATALOGUE_ENV",
    "CLASS_TABLES",
    "CatalogueError",
    "WeightsEntry",
    "cache_dir",
    "cached_file",
    "load_catalogue",
    "lookup",
    "not_cached_message",
    "sha256_file",
]

CATALOGUE_ENV = "STREAMSEG_WEIGHTS_CATALOGUE"
CACHE_ENV = "STREAMSEG_WEIGHTS_DIR"

# ``classes`` values -> where the class-name table lives (module:attribute),
# imported only when an entry's names are asked for; ``checkpoint``: the
# file names its classes itself (a streamseg trainer checkpoint).
_M2F_CLASSES = "streamseg.models.mask2former.classes"
CLASS_TABLES: dict[str, str | None] = {
    "coco91": "streamseg.models.maskrcnn.classes:COCO_CLASS_NAMES",
    "coco80": "streamseg.models.maskrcnn.classes:COCO_CONTIGUOUS_CLASS_NAMES",
    "coco133": f"{_M2F_CLASSES}:COCO_PANOPTIC_CLASS_NAMES",
    "ade150": f"{_M2F_CLASSES}:ADE20K_CLASS_NAMES",
    "checkpoint": None,
}
# ``classes`` values whose tables split into things and stuff -> the stuff names.
STUFF_TABLES: dict[str, str] = {"coco133": f"{_M2F_CLASSES}:COCO_PANOPTIC_STUFF"}


class CatalogueError(ValueError):
    """A catalogue file that cannot be used, or a name that is not in it."""


@dataclasses.dataclass(frozen=True)
class WeightsEntry:
    """One published checkpoint.

    Attributes:
        name: what ``streamseg weights get`` and ``model.weights`` call it.
        arch: the ``streamseg.models`` architecture that loads it.
        classes: a :data:`CLASS_TABLES` name (``coco91``: torchvision's 91
            slots; ``coco80``: the 80 contiguous COCO categories;
            ``checkpoint``: the file's own meta names them).
        url: where it is downloaded from (http or https).
        filename: its name in the cache.
        size: bytes, or ``None`` where no source gives it.
        sha256: lower-case hex; 64 digits is the whole digest, fewer a
            published prefix (checked as a prefix), ``None`` no digest is
            known (a download then needs ``--allow-unverified``).
        licence: the terms the publisher gives.
        task: what the weights were trained for (a ``TASKS`` name): the
            ``model.task`` a pipeline naming the entry gets unless it sets one.
        format, hash_source, notes: free text shown by ``weights list``.
    """

    name: str
    arch: str
    classes: str
    url: str
    filename: str
    size: int | None
    sha256: str | None
    licence: str
    task: str = "instance"
    format: str = ""
    hash_source: str = ""
    notes: str = ""

    @property
    def full_hash(self) -> bool:
        """Whether :attr:`sha256` is the whole digest (not a prefix)."""
        return self.sha256 is not None and len(self.sha256) == 64

    def hash_matches(self, digest: str) -> bool:
        """Whether ``digest`` (64 hex digits) is this entry's (its prefix, for a prefix)."""
        return self.sha256 is not None and digest.lower().startswith(self.sha256)

    def class_names(self) -> tuple[str, ...] | None:
        """The class names of the checkpoint, ``__background__`` first (``None``: the file's)."""
        table = CLASS_TABLES[self.classes]
        if table is None:
            return None
        return _table(table)

    def stuff_classes(self) -> tuple[str, ...]:
        """The names of the stuff classes of a panoptic checkpoint (empty: none known)."""
        table = STUFF_TABLES.get(self.classes)
        return () if table is None else _table(table)


def _table(where: str) -> tuple[str, ...]:
    """The tuple of names at ``"module:attribute"`` (imported now)."""
    names: tuple[str, ...] = load(where)
    return names


def _entry(raw: Any, where: str) -> WeightsEntry:
    if not isinstance(raw, Mapping):
        raise CatalogueError(f"{where}: an entry must be a mapping")
    fields = {f.name for f in dataclasses.fields(WeightsEntry)}
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise CatalogueError(f"{where}: unknown keys {', '.join(unknown)}")
    try:
        entry = WeightsEntry(**raw)
    except TypeError as exc:
        raise CatalogueError(f"{where}: {exc}") from None
    where = f"{where} ({entry.name!r})"
    if entry.arch not in ARCHITECTURES:
        raise CatalogueError(
            f"{where}: arch {entry.arch!r} is not one of {', '.join(ARCHITECTURES)}"
        )
    if entry.classes not in CLASS_TABLES:
        raise CatalogueError(f"{where}: classes must be one of {', '.join(CLASS_TABLES)}")
    problem = task_problem(entry.arch, entry.task) if entry.task in TASKS else None
    if entry.task not in TASKS or problem is not None:
        raise CatalogueError(f"{where}: task: {problem or 'must be one of ' + ', '.join(TASKS)}")
    if not entry.url.startswith(("http://", "https://")):
        raise CatalogueError(f"{where}: url must be http(s)")
    if "/" in entry.filename or entry.filename.startswith("."):
        raise CatalogueError(f"{where}: filename must be a plain file name")
    digest = entry.sha256
    if digest is not None and (
        not 8 <= len(digest) <= 64 or digest != digest.lower() or not _is_hex(digest)
    ):
        raise CatalogueError(f"{where}: sha256 must be 8 to 64 lower-case hex digits or null")
    return entry


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def catalogue_path() -> str:
    """The catalogue file in use: ``$STREAMSEG_WEIGHTS_CATALOGUE`` or the shipped one."""
    override = os.environ.get(CATALOGUE_ENV)
    if override:
        return override
    return str(resources.files("streamseg.models").joinpath("catalogue.json"))


def load_catalogue(path: str | None = None) -> dict[str, WeightsEntry]:
    """The catalogue's entries by name (``path``, else :func:`catalogue_path`).

    Raises:
        CatalogueError: the file is missing, not JSON, or an entry is invalid.
    """
    path = path or catalogue_path()
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise CatalogueError(f"weights catalogue {path}: {exc.strerror or exc}") from None
    return dict(_load(path, stamp))


@lru_cache(maxsize=8)
def _load(path: str, stamp: int) -> tuple[tuple[str, WeightsEntry], ...]:
    """The parsed file; ``stamp`` (its mtime) keys the cache so that an edit is seen."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogueError(f"weights catalogue {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CatalogueError(f"weights catalogue {path} is not valid JSON: {exc}") from None
    raw = data.get("entries") if isinstance(data, Mapping) else None
    if not isinstance(raw, list):
        raise CatalogueError(f"weights catalogue {path} needs an 'entries' list")
    entries = [_entry(item, f"{path}: entries[{i}]") for i, item in enumerate(raw)]
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CatalogueError(f"weights catalogue {path}: duplicate names {', '.join(duplicates)}")
    return tuple((e.name, e) for e in entries)


def lookup(value: str) -> WeightsEntry | None:
    """The entry ``value`` names, or ``None`` when it is a path (not a catalogue name).

    A value is a catalogue name when it is one of the catalogue's names;
    names never contain ``/`` or a file suffix, so a path is never taken
    for one.
    """
    if "/" in value or os.sep in value:
        return None
    return load_catalogue().get(value)


def cache_dir() -> Path:
    """Where downloads live: ``$STREAMSEG_WEIGHTS_DIR`` or ``~/.cache/streamseg/weights``."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path("~/.cache/streamseg/weights").expanduser()


def cached_file(entry: WeightsEntry, directory: Path | None = None) -> Path:
    """Where ``entry``'s file is (or will be) in the cache."""
    return (directory or cache_dir()) / entry.filename


def not_cached_message(entry: WeightsEntry) -> str:
    """What to say when ``entry`` is named but not downloaded: exactly how to fetch it."""
    get = f"`streamseg weights get {entry.name}`"
    if entry.sha256 is None:  # --download never fetches what it cannot check
        how = f"`streamseg weights get {entry.name} --allow-unverified` (no sha256 is published)"
    else:
        how = f"{get}, or start with `streamseg serve --download`"
    return (
        f"catalogue weights {entry.name!r} are not downloaded yet ({cached_file(entry)}); "
        f"fetch them with {how}"
    )


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """The hex sha256 of a file, read in ``chunk``-byte pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
