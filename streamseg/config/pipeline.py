"""The root of pipeline.yaml: every section in one model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from streamseg.config.http import HttpConfig
from streamseg.config.references import camera_id_issues, class_issues
from streamseg.config.runtime import RuntimeConfig
from streamseg.configbase.base import StrictModel
from streamseg.configbase.errors import ConfigIssue, Loc
from streamseg.fleet.config import FleetConfig
from streamseg.ingest.config import CameraConfig
from streamseg.ingest.spec import DECODERS
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink_config import SinkEntry, check_sink_names, sink_entry_union
from streamseg.record.config import RecordConfig
from streamseg.segment.config import ModelConfig
from streamseg.telemetry.config import TelemetryConfig
from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig

__all__ = ["PipelineConfig"]

# One ``sinks:`` entry: the union of the sink types' models (closes their table).
if TYPE_CHECKING:
    SinkConfig = SinkEntry
else:
    SinkConfig = sink_entry_union()


class PipelineConfig(StrictModel):
    """A whole pipeline: cameras in, one model, tracking and alerts, Redis (and more sinks) out."""

    version: int = Field(default=1, ge=1, le=1, description="config format version")
    cameras: list[CameraConfig] = Field(min_length=1)
    model: ModelConfig = ModelConfig()
    tracking: TrackingConfig = TrackingConfig()
    alerts: AlertsConfig = AlertsConfig()
    redis: RedisConfig = RedisConfig()
    sinks: list[SinkConfig] = Field(default=[], description="more sinks besides redis:")
    telemetry: TelemetryConfig = TelemetryConfig()
    http: HttpConfig = HttpConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    record: RecordConfig = RecordConfig()
    fleet: FleetConfig | None = Field(
        default=None, description="share the cameras with other workers through Redis"
    )

    _unique_sinks = field_validator("sinks")(check_sink_names)

    def reference_issues(self) -> list[ConfigIssue]:
        """Sections that name something the file does not define (a camera id, a rule, a
        class), and settings that cannot run together.

        The loader reports these with the other errors (each names its field
        and the names that do exist).
        """
        ids = [cam.id for cam in self.cameras]
        clips = self.record.clips
        named: list[tuple[Loc, str]] = [
            (("alerts", "cameras", cid), cid) for cid in self.alerts.cameras
        ]
        named += [(("record", "clips", "cameras", i), cid) for i, cid in enumerate(clips.cameras)]
        issues = camera_id_issues(ids, named)
        rules = {r.name for cam in self.alerts.cameras.values() for r in cam.rules}
        issues += [
            ConfigIssue(
                f"no alert rule is named {name!r}",
                loc=("record", "clips", "rules", i),
                hint=f"rule names: {', '.join(sorted(rules)) or '(no rules are defined)'}",
            )
            for i, name in enumerate(clips.rules)
            if name not in rules
        ]
        return (
            issues + self._class_issues() + self._model_process_issues() + self._snapshot_issues()
        )

    def _snapshot_issues(self) -> list[ConfigIssue]:
        """A sink that takes alert snapshots (``SinkEntry.snapshot_switch``) takes the
        console's: they need it to keep them."""
        h = self.http
        if h.enabled and h.console and h.snapshots:
            return []
        off = (
            "http.enabled"
            if not h.enabled
            else "http.console"
            if not h.console
            else "http.snapshots"
        )
        issues = []
        for i, sink in enumerate(self.sinks):
            switch = sink.snapshot_switch()
            if switch is not None:
                issues.append(
                    ConfigIssue(
                        f"sink {sink.name!r} takes the console's alert snapshots, "
                        f"but {off} is false",
                        loc=("sinks", i, *switch),
                        hint=f"set {off}: true, or {'.'.join(switch)}: false",
                    )
                )
        return issues

    def _model_process_issues(self) -> list[ConfigIssue]:
        """``runtime.model_process`` takes frames from CPU memory; a decoder that leaves them
        on the device (DALI) cannot feed it."""
        if not self.runtime.model_process:
            return []
        return [
            ConfigIssue(
                "the model's own process takes frames from CPU memory, but this camera "
                f"decodes with {cam.decode} into GPU memory",
                loc=("cameras", i, "decode"),
                hint="use decode: pyav for this camera, or set runtime.model_process: false",
            )
            for i, cam in enumerate(self.cameras)
            if DECODERS[cam.decode].on_device
        ]

    def _class_issues(self) -> list[ConfigIssue]:
        """Rule ``classes`` and ``region`` outside ``model.class_names`` (when the file
        names the classes; else the model's are checked when it is loaded)."""
        names = self.model.class_names
        if names is None:
            return []
        issues = []
        for cid, cam in self.alerts.cameras.items():
            rules = [(i, r.classes, r.region_class()) for i, r in enumerate(cam.rules)]
            issues += class_issues(("alerts", "cameras", cid), rules, names)
        return issues

    def camera(self, camera_id: str) -> CameraConfig:
        for cam in self.cameras:
            if cam.id == camera_id:
                return cam
        raise KeyError(camera_id)
