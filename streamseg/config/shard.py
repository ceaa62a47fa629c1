"""Sharding cameras across processes (e.g. the pods of a Kubernetes StatefulSet).

A shard is ``INDEX/COUNT``; camera ``c`` belongs to shard
``crc32(c.id) % COUNT``. The hash is stable across processes, releases and
machines, so every pod computes the same split from the same pipeline.yaml
without talking to the others.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from streamseg.ingest.config import CameraConfig

__all__ = ["camera_shard", "parse_shard", "select_shard"]

_SHARD = re.compile(r"(?:.+-)?(?P<index>\d+)/(?P<count>\d+)")


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"INDEX/COUNT"``; ``INDEX`` may be a pod name ending in ``-N`` (``streamseg-2/4``).

    Raises ``ValueError`` with the expected form on bad input.
    """
    m = _SHARD.fullmatch(text.strip())
    if m is None:
        raise ValueError(
            f"shard must look like INDEX/COUNT (e.g. 0/4 or streamseg-0/4), got {text!r}"
        )
    index, count = int(m.group("index")), int(m.group("count"))
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {text!r}: need COUNT >= 1 and 0 <= INDEX < COUNT")
    return index, count


def camera_shard(camera_id: str, count: int) -> int:
    """The shard index that serves ``camera_id`` out of ``count`` shards."""
    return zlib.crc32(camera_id.encode("utf-8")) % count


def select_shard(cameras: Sequence[CameraConfig], index: int, count: int) -> list[CameraConfig]:
    """The cameras shard ``index`` of ``count`` serves (may be none)."""
    return [c for c in cameras if camera_shard(c.id, count) == index]
