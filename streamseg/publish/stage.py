"""The publish stage: frame results and alert events -> Redis stream entries."""

from __future__ import annotations

import time
from collections.abc import Sequence

from streamseg.publish.encode import alert_message, detections_message, dumps
from streamseg.publish.publisher import Outgoing, RedisPublisher
from streamseg.types import Event, FrameResult

__all__ = ["PublishStage"]


class PublishStage:
    """Encodes each frame's detections and each event as JSON and hands them to Redis.

    Args:
        publisher: the buffered Redis writer.
        stream_prefix: streams are ``<prefix>:detections:<camera>`` and ``<prefix>:alerts``.
        maxlen / alerts_maxlen: approximate stream lengths kept by Redis.
        arch / class_names: the model, named in every detections message.
    """

    def __init__(
        self,
        *,
        publisher: RedisPublisher,
        stream_prefix: str,
        maxlen: int,
        alerts_maxlen: int,
        arch: str,
        class_names: Sequence[str],
    ) -> None:
        self.publisher = publisher
        self._prefix = stream_prefix
        self._maxlen = maxlen
        self._alerts_maxlen = alerts_maxlen
        self._arch = arch
        self._class_names = tuple(class_names)

    def encode(self, items: Sequence[tuple[FrameResult, Sequence[Event]]]) -> list[Outgoing]:
        """Stream entries for ``items``, in order (a frame's alerts follow its detections)."""
        out: list[Outgoing] = []
        for result, events in items:
            msg = detections_message(
                result, arch=self._arch, class_names=self._class_names, published_time=time.time()
            )
            out.append(
                Outgoing(
                    stream=f"{self._prefix}:detections:{result.frame.camera_id}",
                    data=dumps(msg),
                    maxlen=self._maxlen,
                    kind="detections",
                    frame=result.frame,
                )
            )
            for event in events:
                out.append(
                    Outgoing(
                        stream=f"{self._prefix}:alerts",
                        data=dumps(alert_message(event)),
                        maxlen=self._alerts_maxlen,
                        kind="alert",
                    )
                )
        return out

    def process(self, items: Sequence[tuple[FrameResult, Sequence[Event]]]) -> None:
        """Encode and submit (one pipelined round trip per ``max_batch`` entries)."""
        self.publisher.submit(self.encode(items))

    def close(self, timeout: float = 10.0) -> bool:
        """Flush what is buffered (up to ``timeout`` seconds); ``True`` if all was sent."""
        done = self.publisher.flush(timeout)
        self.publisher.close()
        return done
