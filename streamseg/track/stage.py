"""The track + alert pipeline stage: ``FrameResult`` -> tracked ``FrameResult`` and ``Event``s.

Example::

    >>> from streamseg.track.alerts import AlertsConfig, CameraAlerts
    >>> from streamseg.track.config import TrackingConfig
    >>> stage = build_tracking_stage(TrackingConfig(), AlertsConfig(), ["__background__", "box"])
    >>> stage.close()
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator, Sequence

import torch
from opentelemetry import metrics

from streamseg.track.alerts import AlertsConfig, CameraAlerts
from streamseg.track.config import TrackingConfig
from streamseg.track.rules.engine import CameraRules
from streamseg.track.trackers import InstanceTracker, build_tracker
from streamseg.track.view import FrameInfo
from streamseg.types import Event, FrameResult, Track

__all__ = ["TrackingStage", "build_tracking_stage"]

log = logging.getLogger("streamseg.track")


@dataclasses.dataclass
class _Camera:
    tracker: InstanceTracker
    rules: CameraRules | None
    image_size: tuple[int, int] | None = None


class TrackingStage:
    """Per-camera trackers and alert rules (stage name ``track``).

    Args:
        tracking: the ``tracking:`` section (``enabled: false`` keeps the
            ``track_ids`` instances arrive with).
        alerts: the ``alerts:`` section.
        class_names: the model's class names (index 0 is background).
        region_classes: the classes the model gives as regions (``None``: not
            known); rules are checked against them (``streamseg.track.rules.checks``).
        meter_provider: OpenTelemetry meter provider; default the global one.

    ``process`` never mutates its input: it returns a new ``FrameResult``
    whose ``Instances`` have ``track_ids`` (int64, ``-1`` for detections no
    confirmed track took) and the alert events of that frame. Rule
    classes are checked against ``class_names`` here (``RuleError``, a
    ``ValueError`` naming the field). A rule that fails on a frame is
    disabled, logged and counted (``streamseg.track.rules.failures``), and
    listed by ``degraded()``; the camera's other rules go on.
    ``rules_seconds`` counts the CPU time (of the calling thread) spent in
    the rules.
    """

    def __init__(
        self,
        *,
        tracking: TrackingConfig,
        alerts: AlertsConfig,
        class_names: Sequence[str],
        region_classes: Sequence[str] | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        from streamseg.track.telemetry import watch

        self.tracking = tracking
        self.alerts = alerts
        self.class_names = tuple(class_names)
        self.region_classes = None if region_classes is None else tuple(region_classes)
        self._rules = {cid: self._new_rules(cid, cam) for cid, cam in alerts.cameras.items()}
        self.cameras: dict[str, _Camera] = {}
        self._pending: dict[str, CameraRules | None] | None = None
        self._forget: set[str] = set()  # cameras removed while running (forget_camera)
        self._pending_lock = threading.Lock()
        self._metrics = watch(self, meter_provider)
        self._closed = False
        self.rules_seconds = 0.0

    def process(self, result: FrameResult) -> tuple[FrameResult, list[Event]]:
        """Track one frame's instances and run that camera's rules."""
        frame, inst = result.frame, result.instances
        if self._pending is not None:
            self._apply_pending()
        cam = self._camera(frame.camera_id, inst.image_size)
        info = FrameInfo(frame.camera_id, frame.capture_time, frame.seq, frame.pts, inst.image_size)
        out = cam.tracker.update(info, inst)
        started = cam.tracker.confirmed()
        if started:
            self._metrics.started.add(started, {"camera": frame.camera_id})
        track_ids = torch.from_numpy(out.track_ids)
        if inst.device.type != "cpu":
            track_ids = track_ids.to(inst.device)
        tracked = FrameResult(frame, inst.replace(track_ids=track_ids))
        events: list[Event] = []
        if cam.rules is not None and self.alerts.enabled:
            t0 = time.thread_time()
            view = out.view
            if inst.regions is not None:
                view = dataclasses.replace(view, regions=inst.regions)
            events = cam.rules.update(view)
            self.rules_seconds += time.thread_time() - t0
            for e in events:
                attrs = {"camera": e.camera_id, "rule": e.rule, "kind": e.kind}
                self._metrics.events.add(1, attrs)
        return tracked, events

    def set_alerts(self, alerts: AlertsConfig) -> None:
        """Change the rules while running (any thread): taken before the next frame.

        Cameras whose section did not change keep their rules and state; a
        changed camera's rules start afresh (tracks are kept). Raises
        ``ValueError`` (``RuleError``, naming the field) for a rule this
        model cannot run, and then changes nothing.
        """
        changed: dict[str, CameraRules | None] = {}
        for cid in set(self.alerts.cameras) | set(alerts.cameras):
            new = alerts.cameras.get(cid)
            if new == self.alerts.cameras.get(cid) and cid in self._rules:
                continue
            changed[cid] = None if new is None else self._new_rules(cid, new)
        with self._pending_lock:
            pending = dict(self._pending or {})
            pending.update(changed)
            self._pending = pending
            self.alerts = alerts

    def forget_camera(self, camera_id: str) -> None:
        """Drop a removed camera's tracks and rule state (any thread): from now on the
        gauges leave it out, and before the next frame its state is gone. A frame of
        it coming later starts it afresh."""
        with self._pending_lock:
            self._forget.add(camera_id)
            self._pending = dict(self._pending or {})  # process() looks at it next frame

    def _apply_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending or {}, None
            forget, self._forget = self._forget, set()
        for cid in forget:
            self.cameras.pop(cid, None)
            old = self._rules.pop(cid, None)
            if old is not None and cid in self.alerts.cameras:  # its rules, without their state
                self._rules[cid] = self._new_rules(cid, old.config)
        for cid, rules in pending.items():
            if rules is None:
                self._rules.pop(cid, None)
            else:
                self._rules[cid] = rules
            cam = self.cameras.get(cid)
            if cam is not None:
                cam.rules = rules
            n = len(rules.config.rules) if rules is not None else 0
            log.info("track[%s]: alert rules changed (%d rules)", cid, n)

    def _new_rules(self, camera_id: str, config: CameraAlerts) -> CameraRules:
        return CameraRules(
            camera_id=camera_id,
            config=config,
            class_names=self.class_names,
            region_classes=self.region_classes,
            on_failure=self._rule_failed,
        )

    def _rule_failed(self, camera_id: str, rule: str, exc: BaseException) -> None:
        self._metrics.failures.add(1, {"camera": camera_id, "rule": rule})

    def degraded(self) -> dict[str, dict[str, str]]:
        """``{camera: {rule: why}}`` of the rules disabled because they failed (empty
        when every rule runs); they stay off until the camera's rules change."""
        out: dict[str, dict[str, str]] = {}
        for cid, rules in list(self._rules.items()):
            cam = self.cameras.get(cid)
            running = cam.rules if cam is not None and cam.rules is not None else rules
            if running.failed:
                out[cid] = dict(running.failed)
        return out

    def counts(self, camera_id: str) -> dict[str, object]:
        """What the overlays show: ``{zone: tracks inside}``, ``{line: (in, out)}``."""
        cam = self.cameras.get(camera_id)
        if cam is None or cam.rules is None:
            return {}
        out: dict[str, object] = {zone: occ for _rule, zone, occ in cam.rules.occupancy()}
        out.update(cam.rules.line_counts())
        return out

    def tracks(self, camera_id: str) -> list[Track]:
        """Snapshots of a camera's live tracks (tentative, confirmed and lost)."""
        cam = self.cameras.get(camera_id)
        return cam.tracker.tracks(camera_id) if cam is not None else []

    def close(self) -> None:
        """Drop all state (the stage's gauges stop reporting)."""
        self._closed = True
        self.cameras.clear()
        self._metrics.stages.discard(self)

    # -- per camera --------------------------------------------------------------
    def _camera(self, camera_id: str, size: tuple[int, int]) -> _Camera:
        cam = self.cameras.get(camera_id)
        if cam is not None and cam.image_size == size:
            return cam
        if cam is not None:
            log.warning(
                "track[%s]: frame size changed from %s to %s; tracks start afresh",
                camera_id,
                cam.image_size,
                size,
            )
        tracker = build_tracker(self.tracking, num_classes=len(self.class_names))
        rules = self._rules.get(camera_id)
        if rules is not None and cam is not None:
            rules = self._rules[camera_id] = self._new_rules(camera_id, rules.config)
        cam = self.cameras[camera_id] = _Camera(tracker, rules, size)
        return cam

    # -- gauges ----------------------------------------------------------------------
    def occupancy_observations(self) -> Iterator[tuple[int, dict[str, str]]]:
        if self._closed:
            return
        for cid, cam in list(self.cameras.items()):
            if cam.rules is None or cid in self._forget:
                continue
            for rule, zone, occ in cam.rules.occupancy():
                yield occ, {"camera": cid, "rule": rule, "zone": zone}

    def track_observations(self) -> Iterator[tuple[int, dict[str, str]]]:
        if self._closed:
            return
        for cid, cam in list(self.cameras.items()):
            if cid in self._forget:
                continue
            for state, n in cam.tracker.state_counts().items():
                yield n, {"camera": cid, "state": state}


def build_tracking_stage(
    tracking: TrackingConfig,
    alerts: AlertsConfig,
    class_names: Sequence[str],
    region_classes: Sequence[str] | None = None,
) -> TrackingStage:
    """The ``track`` stage for the runtime (see ``TrackingStage``)."""
    return TrackingStage(
        tracking=tracking, alerts=alerts, class_names=class_names, region_classes=region_classes
    )
