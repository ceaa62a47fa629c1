"""What the MQTT sink keeps retained on the broker, besides the messages it forwards.

* ``CameraStates``: each camera's state message for ``<prefix>/<camera>/state``:
  the objects it sees now (by class, from its latest detections message)
  and its health (from the runtime), made when either changed and at most
  once per ``interval`` seconds per camera; a camera that is no longer
  served gets an empty retained message (which deletes the retained one).
* ``fit_jpeg``: a snapshot JPEG made to fit the size limit of its topic.

State message (JSON, retained)::

    {"camera": "gate", "time": 1718000000.125, "objects": {"person": 2, "car": 1},
     "health": {"state": "streaming", "since": 1717999000.4, "reconnects": 0,
                "stalls": 0, "last_error": null}}

``objects`` counts the instances with a track id (confirmed tracks) of the
camera's latest frame, by ``label_name``; with tracking off, every instance.
``health`` is ``null`` when the runtime gives none.
"""

from __future__ import annotations

import collections
import io
import time
from typing import Any

import orjson

from streamseg.publish.encode import round_time
from streamseg.publish.sink import CameraHealth

__all__ = ["HEALTH_KEYS", "CameraStates", "fit_jpeg"]

# What of a camera's health goes into its state (it changes when the camera's state does).
HEALTH_KEYS = ("state", "since", "reconnects", "stalls", "last_error")


class CameraStates:
    """The cameras' retained states (used by the MQTT sink's writer thread only).

    Args:
        interval: least seconds between two states of one camera.
        count_untracked: count instances without a track id too (tracking off).
    """

    def __init__(self, *, interval: float, count_untracked: bool = False) -> None:
        self.interval = interval
        self.count_untracked = count_untracked
        self._objects: dict[str, dict[str, int]] = {}
        self._sent: dict[str, tuple[Any, float]] = {}  # camera -> (what was sent, when)

    def detections(self, camera: str, data: bytes) -> None:
        """Take a camera's detections message (JSON bytes) as what it sees now."""
        try:
            instances = orjson.loads(data).get("instances") or []
        except (orjson.JSONDecodeError, AttributeError):
            return
        counts: collections.Counter[str] = collections.Counter()
        for inst in instances:
            if inst.get("track_id") is not None or self.count_untracked:
                name = inst.get("label_name")
                counts[str(name if name is not None else inst.get("label"))] += 1
        self._objects[camera] = dict(sorted(counts.items()))

    def forget_sent(self) -> None:
        """After a reconnect: every camera's state is sent again."""
        self._sent.clear()

    def due(self, health: CameraHealth | None, now: float | None = None) -> list[tuple[str, bytes]]:
        """``(camera, payload)`` of each state to publish now; an empty payload clears the
        retained state of a camera no longer served (not in ``health``)."""
        now = time.time() if now is None else now
        cameras = list(health) if health is not None else list(self._objects)
        out: list[tuple[str, bytes]] = []
        for cid in [c for c in self._sent if c not in cameras]:
            del self._sent[cid]
            self._objects.pop(cid, None)
            out.append((cid, b""))
        for cid in cameras:
            h = health.get(cid) if health is not None else None
            key = (
                self._objects.get(cid, {}),
                None if h is None else {k: h.get(k) for k in HEALTH_KEYS},
            )
            last = self._sent.get(cid)
            if last is not None and (last[0] == key or now - last[1] < self.interval):
                continue
            self._sent[cid] = (key, now)
            message = {"camera": cid, "time": round_time(now), "objects": key[0], "health": key[1]}
            out.append((cid, orjson.dumps(message)))
        return out


def fit_jpeg(data: bytes, max_bytes: int) -> bytes | None:
    """``data`` (a JPEG) if it fits ``max_bytes``, else scaled down until it does
    (``None`` when even a small one does not)."""
    if len(data) <= max_bytes:
        return data
    from PIL import Image

    image: Image.Image = Image.open(io.BytesIO(data))
    for _ in range(8):
        w, h = image.size
        if w < 32 or h < 32:
            return None
        image = image.resize((w * 7 // 10, h * 7 // 10))
        buf = io.BytesIO()
        image.save(buf, format="JPEG", quality=70)
        if buf.tell() <= max_bytes:
            return buf.getvalue()
    return None
