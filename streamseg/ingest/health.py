"""Per-camera health: a small state machine readable from any thread.

States (``HealthState``):

* ``connecting``: opening the stream (RTSP handshake, file open, device open);
* ``streaming``: packets arrive;
* ``stalled``: the stream stayed open but sent nothing for ``read_timeout``;
  it is closed, and the source stays ``stalled`` while it waits to reopen
  it (next state: ``connecting``); ``stalls`` counts these;
* ``backing_off``: waiting before the next connection attempt;
* ``finished``: a non-looping file (or a finite synthetic scene) ended;
* ``failed``: gave up (a file that cannot be read, or a live source that
  exhausted ``ReconnectPolicy.max_attempts``);
* ``stopped``: ``run()`` returned because ``stop`` was set.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import threading
import time
from collections.abc import Callable

from streamseg.redact import redact_text

__all__ = ["CameraHealth", "HealthState", "HealthTracker"]


class HealthState(enum.StrEnum):
    CONNECTING = "connecting"
    STREAMING = "streaming"
    STALLED = "stalled"
    BACKING_OFF = "backing_off"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclasses.dataclass(frozen=True)
class CameraHealth:
    """A snapshot of one source's health.

    Attributes:
        camera_id: the camera.
        state: see ``HealthState``.
        since: wall time (unix seconds) of the last state change.
        reconnects: connection attempts after the first one (each retry counts).
        stalls: open streams that went silent for ``read_timeout`` and were closed.
        frames: frames decoded (the next ``Frame.seq``), rate-limited ones included.
        emitted: frames handed to ``emit``.
        dropped_rate_limit: frames skipped by ``max_fps``.
        decode_errors: packets the decoder rejected (skipped, the stream goes on).
        last_frame_time: wall time of the latest decoded frame, or ``None``.
        last_error: the latest error, with secrets redacted, or ``None``.
    """

    camera_id: str
    state: HealthState
    since: float
    reconnects: int = 0
    stalls: int = 0
    frames: int = 0
    emitted: int = 0
    dropped_rate_limit: int = 0
    decode_errors: int = 0
    last_frame_time: float | None = None
    last_error: str | None = None

    @property
    def ok(self) -> bool:
        """True while the source delivers (or has finished delivering) frames."""
        return self.state in (HealthState.STREAMING, HealthState.FINISHED)


StateListener = Callable[[CameraHealth], None]


class HealthTracker:
    """Thread-safe mutable health of one source; ``snapshot()`` gives a ``CameraHealth``.

    ``secrets`` (e.g. the URL's password) are redacted from every error
    message, on top of any ``scheme://user:password@`` pattern.
    ``history`` keeps the latest state changes as ``(time, state)``.
    """

    def __init__(
        self,
        camera_id: str,
        *,
        secrets: tuple[str, ...] = (),
        on_state: StateListener | None = None,
        history: int = 64,
    ) -> None:
        self._lock = threading.Lock()
        self._secrets = tuple(s for s in secrets if s)
        self._on_state = on_state
        self._h = CameraHealth(camera_id=camera_id, state=HealthState.CONNECTING, since=time.time())
        self._history: collections.deque[tuple[float, HealthState]] = collections.deque(
            [(self._h.since, self._h.state)], maxlen=history
        )

    def snapshot(self) -> CameraHealth:
        with self._lock:
            return self._h

    def history(self) -> list[tuple[float, HealthState]]:
        """State changes, oldest first, as ``(unix time, state)``."""
        with self._lock:
            return list(self._history)

    @property
    def state(self) -> HealthState:
        return self.snapshot().state

    def redact(self, message: str) -> str:
        return redact_text(message, *self._secrets)

    def set_state(self, state: HealthState, error: str | None = None) -> None:
        """Move to ``state``; ``error`` (redacted here) becomes ``last_error``."""
        with self._lock:
            changes: dict[str, object] = {}
            if error is not None:
                changes["last_error"] = self.redact(error)
            changed = state != self._h.state
            if changed:
                now = time.time()
                changes.update(state=state, since=now)
                self._history.append((now, state))
            if changes:
                self._h = dataclasses.replace(self._h, **changes)  # type: ignore[arg-type]
            snap = self._h
        if changed and self._on_state is not None:
            self._on_state(snap)

    def error(self, message: str) -> None:
        """Record an error without changing state."""
        with self._lock:
            self._h = dataclasses.replace(self._h, last_error=self.redact(message))

    def count(self, **increments: int) -> None:
        """Add to counters, e.g. ``count(reconnects=1)``."""
        with self._lock:
            self._h = dataclasses.replace(
                self._h,
                **{k: getattr(self._h, k) + v for k, v in increments.items()},
            )

    def frame_decoded(self, *, emitted: bool, when: float) -> None:
        with self._lock:
            h = self._h
            self._h = dataclasses.replace(
                h,
                frames=h.frames + 1,
                emitted=h.emitted + int(emitted),
                dropped_rate_limit=h.dropped_rate_limit + int(not emitted),
                last_frame_time=when,
            )
