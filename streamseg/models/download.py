"""Downloading catalogue weights: resumable, hash-checked, never half-written in place.

:func:`fetch` writes ``<cache>/<filename>.part``, resuming an earlier partial
download with an HTTP ``Range`` request, checks the size and sha256 of the
whole file, and only then renames it to ``<cache>/<filename>`` (an atomic
rename on one file system). So the path a model loads from holds either
nothing or a file whose hash matched; a file that fails its check is
deleted.

HTTP is the standard library's ``urllib.request``: one GET with a
``Range`` header is all this needs, and it adds no dependency. Progress is
a ``tqdm`` bar on stderr.
"""

from __future__ import annotations

import http.client
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from streamseg.models.weights import WeightsEntry, cache_dir, cached_file, sha256_file
from streamseg.redact import redact_url

__all__ = ["DownloadError", "UnverifiedError", "fetch"]

_CHUNK = 1 << 16
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class DownloadError(RuntimeError):
    """A download that failed; the message says why and what to do next."""


class UnverifiedError(DownloadError):
    """The entry has no digest to check against and the caller did not allow that."""


def fetch(
    entry: WeightsEntry,
    *,
    directory: Path | None = None,
    allow_unverified: bool = False,
    progress: bool = True,
    timeout: float = 30.0,
) -> Path:
    """Download ``entry`` into the cache (or ``directory``) and return its path.

    A file already there whose hash matches is returned at once; one whose
    hash does not match is deleted and fetched again.

    Raises:
        UnverifiedError: the entry has no sha256 and ``allow_unverified`` is off.
        DownloadError: HTTP error, unreachable server, interrupted transfer
            (the ``.part`` file stays, and the next call resumes it), or a
            size or hash mismatch (the file is deleted).
    """
    if entry.sha256 is None and not allow_unverified:
        raise UnverifiedError(
            f"{entry.name}: the catalogue has no sha256 for this file, so a download could "
            "not be checked; pass --allow-unverified to fetch it anyway (its sha256 is printed "
            "so you can compare it with a source you trust)"
        )
    directory = directory or cache_dir()
    target = cached_file(entry, directory)
    if target.is_file():
        if entry.sha256 is None or entry.hash_matches(sha256_file(target)):
            return target
        _log(f"{target} does not match the catalogue's sha256; downloading it again")
        target.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    _transfer(entry, part, progress=progress, timeout=timeout)
    _check(entry, part)
    os.replace(part, target)
    return target


def _check(entry: WeightsEntry, part: Path) -> None:
    """Size and sha256 of the finished ``.part`` file; deleted when either is wrong."""
    size = part.stat().st_size
    if entry.size is not None and size != entry.size:
        part.unlink()
        raise DownloadError(
            f"{entry.name}: downloaded {size} bytes but the catalogue says {entry.size}; "
            "the file was deleted. Run the command again; if it happens again the "
            "server's file has changed"
        )
    digest = sha256_file(part)
    if entry.sha256 is not None and not entry.hash_matches(digest):
        part.unlink()
        expected = entry.sha256 + ("" if entry.full_hash else "... (published prefix)")
        raise DownloadError(
            f"{entry.name}: sha256 mismatch: got {digest}, expected {expected}; the file was "
            "deleted. Check the URL or mirror in the catalogue; do not use this file"
        )
    _log(f"{entry.name}: sha256 {digest}" + ("" if entry.sha256 else " (unverified)"))


def _transfer(entry: WeightsEntry, part: Path, *, progress: bool, timeout: float) -> None:
    """Get the bytes of ``entry.url`` into ``part``, resuming from its current size."""
    offset = part.stat().st_size if part.exists() else 0
    if entry.size is not None and offset > entry.size:
        part.unlink()
        offset = 0
    if entry.size is not None and offset == entry.size:
        return  # complete already: the hash check decides
    url = redact_url(entry.url)
    headers = {"User-Agent": "streamseg-weights", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(  # http(s) only: the catalogue checks
            urllib.request.Request(entry.url, headers=headers), timeout=timeout
        )
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            return  # nothing after `offset`: the file is whole (the hash check decides)
        raise DownloadError(
            f"{entry.name}: {url} answered HTTP {exc.code} {exc.reason}; the file may have "
            "moved: check the entry's url in the catalogue"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        host = urllib.parse.urlsplit(entry.url).netloc.rpartition("@")[2]
        raise DownloadError(
            f"{entry.name}: cannot reach {host} ({reason}); check the network, a proxy "
            "(https_proxy) or the catalogue's url"
        ) from None
    with response:
        offset = _resume_offset(response, offset, part)
        _copy(entry, response, part, offset, progress=progress)


def _resume_offset(response: http.client.HTTPResponse, offset: int, part: Path) -> int:
    """Where the body starts: ``offset`` for a matching 206, else 0 (start over)."""
    if not offset:
        return 0
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
    if response.status == 206 and match and int(match.group(1)) == offset:
        return offset
    _log(f"{part.name}: the server did not resume at byte {offset}; starting over")
    part.unlink()
    return 0


def _copy(
    entry: WeightsEntry,
    response: http.client.HTTPResponse,
    part: Path,
    offset: int,
    *,
    progress: bool,
) -> None:
    from tqdm import tqdm

    length = response.headers.get("Content-Length")
    expected = offset + int(length) if length and length.isdigit() else entry.size
    received = 0
    with (
        open(part, "ab" if offset else "wb") as out,
        tqdm(
            total=expected,
            initial=offset,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=entry.name,
            disable=not progress,
            file=sys.stderr,
        ) as bar,
    ):
        try:
            while block := response.read(_CHUNK):
                out.write(block)
                received += len(block)
                bar.update(len(block))
        except (OSError, http.client.HTTPException) as exc:
            raise _interrupted(entry, offset + received, exc) from None
    if expected is not None and offset + received < expected:
        raise _interrupted(entry, offset + received, "connection closed early")


def _interrupted(entry: WeightsEntry, have: int, why: object) -> DownloadError:
    return DownloadError(
        f"{entry.name}: download interrupted after {have} bytes ({why}); run "
        f"`streamseg weights get {entry.name}` again to resume from there"
    )


def _log(message: str) -> None:
    print(message, file=sys.stderr)
