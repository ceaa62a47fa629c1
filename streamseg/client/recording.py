"""Recorded detections, read back: a JSON-lines file or a service's Redis detections streams.

``streamseg replay`` and ``streamseg render`` read through one
:class:`Recording`: from a file of detections messages, one per line (what
``streamseg subscribe`` prints, bare or with ``--envelope``; ``-`` for
stdin), or from the ``<prefix>:detections:<camera>`` streams of a Redis
(every entry they still hold, merged across cameras by capture time).
Each item is ``(where, message)``: ``where`` names the line
(``file:12``) or the stream entry (``<stream> <id>``) for error messages,
``message`` is the detections message as a dict (docs/events.md). Alerts
in a file are skipped.

Example::

    recording = Recording.from_file("detections.jsonl")
    for where, msg in recording.messages(["gate"]):
        print(where, msg["seq"], len(msg["instances"]))
"""

from __future__ import annotations

import heapq
import io
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from streamseg.publish.redis_config import RedisConfig
from streamseg.redact import redact_url
from streamseg.streams import (
    RecordingError,
    camera_of_stream,
    detections_pattern,
    detections_stream,
    recorded_detections,
)

__all__ = ["Recording", "RecordingError", "file_messages", "redis_cameras", "redis_messages"]

Item = tuple[str, dict[str, Any]]

# Reading a whole stream back can take a while on a slow link: wait this long per reply.
READ_TIMEOUT_S = 30.0


def file_messages(path: str | Path, stream: TextIO | None = None) -> Iterator[Item]:
    """``(where, message)`` for each detections message of a JSON-lines file.

    Blank lines and messages of another ``type`` (alerts) are skipped; an
    ``{"stream", "id", "message"}`` envelope is unwrapped. ``stream``: read
    this open text stream instead (``-`` for stdin).
    """
    name = str(path)
    try:
        handle = stream if stream is not None else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise RecordingError(f"{name}: cannot read: {exc.strerror or exc}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{name}:{number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordingError(
                    f"{where}: not JSON ({exc.msg}); expected one message per line"
                ) from None
            msg = recorded_detections(obj, where)
            if msg is not None:
                yield where, msg


def redis_messages(
    client: Any, prefix: str, cameras: Sequence[str], *, chunk: int = 500
) -> Iterator[Item]:
    """``(where, message)`` of the cameras' detections streams, by capture time."""
    parts = [_read_stream(client, detections_stream(prefix, c), chunk) for c in cameras]
    yield from heapq.merge(*parts, key=lambda item: float(item[1].get("capture_time") or 0.0))


def redis_cameras(client: Any, prefix: str) -> list[str]:
    """Camera ids that have a detections stream under ``prefix``."""
    keys = client.scan_iter(match=detections_pattern(prefix), _type="stream")
    return sorted(c for c in (camera_of_stream(prefix, k) for k in keys) if c is not None)


def _read_stream(client: Any, stream: str, chunk: int) -> Iterator[Item]:
    start = "-"
    while True:
        entries = client.xrange(stream, min=start, max="+", count=chunk)
        if not entries:
            return
        for entry_id, fields in entries:
            eid = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            where = f"{stream} {eid}"
            data = fields.get(b"data", fields.get("data"))
            if data is None:
                raise RecordingError(f"{where}: the entry has no `data` field")
            try:
                obj = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise RecordingError(f"{where}: `data` is not JSON ({exc})") from None
            msg = recorded_detections(obj, where)
            if msg is not None:
                yield where, msg
        start = "(" + eid


class Recording:
    """Recorded detections messages from a file or from Redis (see the module docstring).

    Build one with :meth:`from_file` or :meth:`from_redis`. ``where`` names
    the source in messages (the path, or the Redis url without its
    password); ``prefix`` is the stream prefix (``None`` for a file).
    """

    def __init__(
        self,
        *,
        where: str,
        path: str | None = None,
        text: str | None = None,
        client: Any = None,
        prefix: str | None = None,
    ) -> None:
        self.where, self.prefix = where, prefix
        self._path, self._text, self._client = path, text, client

    @classmethod
    def from_file(cls, path: str) -> Recording:
        """The detections messages of a JSON-lines file (``-``: stdin, read once now)."""
        if path == "-":
            return cls(where="<stdin>", text=sys.stdin.read())
        return cls(where=path, path=path)

    @classmethod
    def from_redis(cls, section: RedisConfig, *, prefix: str | None = None) -> Recording:
        """The detections streams of the Redis ``section`` describes (its password and TLS
        files); ``prefix``: the stream prefix (default: the section's). Nothing is read
        yet: :meth:`ping` checks that Redis answers."""
        from streamseg.publish.connect import redis_client

        client = redis_client(section, socket_timeout=max(section.socket_timeout, READ_TIMEOUT_S))
        return cls(
            where=redact_url(section.url), client=client, prefix=prefix or section.stream_prefix
        )

    @property
    def is_redis(self) -> bool:
        return self._client is not None

    def ping(self) -> None:
        """Check that Redis answers (``redis.RedisError`` when not; a file: nothing)."""
        if self._client is not None:
            self._client.ping()

    def cameras(self) -> list[str]:
        """The cameras the recording has detections of, sorted."""
        if self._client is not None:
            return redis_cameras(self._client, str(self.prefix))
        return sorted({str(m["camera"]) for _, m in self._lines()})

    def stream(self, camera: str) -> str:
        """The Redis stream of ``camera`` (for messages about it)."""
        return detections_stream(str(self.prefix), camera)

    def messages(self, cameras: Sequence[str] | None = None) -> Iterator[Item]:
        """A fresh iterator of ``(where, message)``: every camera's messages (``None``),
        or those of ``cameras``; from Redis ordered by capture time, from a file in
        the file's order."""
        if self._client is not None:
            chosen = self.cameras() if cameras is None else cameras
            return redis_messages(self._client, str(self.prefix), chosen)
        if cameras is None:
            return self._lines()
        wanted = set(cameras)
        return ((w, m) for w, m in self._lines() if m["camera"] in wanted)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _lines(self) -> Iterator[Item]:
        if self._text is not None:
            return file_messages(self.where, io.StringIO(self._text))
        return file_messages(str(self._path))
