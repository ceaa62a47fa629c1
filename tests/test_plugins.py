"""A plug-in from outside the package: a sink, a rule kind and a decoder, all defined here.

This module is the plug-in: ``STREAMSEG_PLUGINS=tests.test_plugins:register``
has ``streamseg check`` and ``streamseg serve`` (real subprocesses) load it,
and :func:`register` adds its rows through the public registration API
(``register_sink_type``, ``register_rule_kind``, ``register_decoder``), before
any config type is built. Nothing in the package names them:

* sink ``jsonfile``: each alert as one JSON line in a file; its config says
  what ``check`` prints (``describe``) and when it takes snapshots;
* rule kind ``tick``: an alert every ``every`` frames of a camera;
* decoder ``shifted``: PyAV's, with every presentation time moved 1000 s on,
  so an alert's ``pts`` tells that its frame came through this decoder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

from streamseg.ingest.spec import DECODERS, DecoderKind, register_decoder
from streamseg.publish.buffered import BufferedSink
from streamseg.publish.sink import Message
from streamseg.publish.sink_config import SINK_TYPES, SinkEntry, SinkType, register_sink_type
from streamseg.registry import RegistryClosed
from streamseg.track.rule_config import RuleFields
from streamseg.track.rule_kinds import RULE_KINDS, RuleKind, register_rule_kind
from streamseg.track.rules.base import RuleBase
from streamseg.track.view import TrackView
from streamseg.types import Event
from tests.support.serve import REPO, ServeProcess, service_pipeline
from tests.support.servers import cli_env
from tests.support.video import write_h264

HERE = "tests.test_plugins"
SHIFT = 1000.0  # seconds the ``shifted`` decoder adds to every pts


# -- the sink ---------------------------------------------------------------------------


class FileSinkConfig(SinkEntry):
    """A ``sinks:`` entry of type ``jsonfile``."""

    type: Literal["jsonfile"]
    path: str
    snapshots: bool = False

    def describe(self) -> str:
        return f"alerts as JSON lines in {self.path}"

    def snapshot_switch(self) -> tuple[str, ...] | None:
        return ("snapshots",) if self.snapshots else None


class FileSink(BufferedSink):
    """Appends every alert message to a file, one JSON document a line."""

    type = "jsonfile"

    def __init__(self, config: FileSinkConfig, *, name: str) -> None:
        super().__init__(name=name)
        self.path = Path(config.path)

    def _connect(self) -> None:
        self.path.touch()

    def _write(self, batch: Sequence[Message]) -> Sequence[BaseException | None]:
        with self.path.open("ab") as out:
            for m in batch:
                if m.kind == "alert":
                    out.write(m.data + b"\n")
        return [None] * len(batch)

    def _disconnect(self) -> None:
        pass

    def destination(self, message: Message) -> str:
        return str(self.path)


def build_file_sink(config: FileSinkConfig, *, name: str) -> FileSink:
    return FileSink(config, name=name)


# -- the rule kind ----------------------------------------------------------------------


class TickConfig(RuleFields):
    """A ``rules:`` entry of type ``tick``."""

    type: Literal["tick"]
    every: int = Field(default=1, ge=1, description="frames between two alerts")


class TickRule(RuleBase):
    """A ``tick`` alert (no track) on every ``every``-th frame of its camera."""

    def __init__(self, *, every: int, **common: Any) -> None:
        super().__init__(**common)
        self.every = every
        self.frames = 0

    @classmethod
    def from_config(cls, rule: Any, context: Any) -> TickRule:
        return cls(every=rule.every, **context.common)

    def update(self, view: TrackView) -> list[Event]:
        self.frames += 1
        if self.frames % self.every:
            return []
        return [self.event("tick", view, None, extra={"frames": self.frames})]


# -- the decoder ------------------------------------------------------------------------


class _Shifted:
    __slots__ = ("_picture", "pts")

    def __init__(self, picture: Any) -> None:
        self._picture = picture
        self.pts = None if picture.pts is None else picture.pts + SHIFT

    def image(self) -> Any:
        return self._picture.image()


class ShiftedDecoder:
    """PyAV's decoder, each picture's pts moved ``SHIFT`` seconds on."""

    def __init__(self, *, stream: Any, device: str = "cpu") -> None:
        from streamseg.ingest.decoders import PyAVDecoder

        self._inner = PyAVDecoder(stream=stream)

    def decode(self, packet: Any) -> list[_Shifted]:
        return [_Shifted(p) for p in self._inner.decode(packet)]

    def flush(self) -> list[_Shifted]:
        return [_Shifted(p) for p in self._inner.flush()]

    def close(self) -> None:
        self._inner.close()


# -- the plug-in ------------------------------------------------------------------------


def register() -> None:
    """Add this module's rows (``STREAMSEG_PLUGINS=tests.test_plugins:register``)."""
    register_sink_type("jsonfile", SinkType(FileSinkConfig, f"{HERE}:build_file_sink"))
    register_rule_kind(RuleKind(TickConfig, f"{HERE}:TickRule", {"tick": "every `every`-th frame"}))
    register_decoder("shifted", DecoderKind(f"{HERE}:ShiftedDecoder"))


def _env() -> dict[str, str]:
    plugins = os.environ.get("STREAMSEG_PLUGINS", "")
    return {**cli_env(), "STREAMSEG_PLUGINS": f"{plugins},{HERE}:register".lstrip(",")}


def _pipeline(clip: Path, out: Path, redis_url: str, **sink: Any) -> dict[str, Any]:
    camera = {"id": "clip", "url": str(clip), "decode": "shifted"}
    alerts = {"cameras": {"clip": {"rules": [{"name": "beat", "type": "tick", "every": 5}]}}}
    sinks = [{"type": "jsonfile", "name": "out", "path": str(out), **sink}]
    config = service_pipeline([camera], {"url": redis_url}, alerts=alerts, sinks=sinks)
    config["runtime"]["model_process"] = False
    config["http"] = {"host": "127.0.0.1", "port": 0}  # any free port: no race with others
    return config


def _check(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamseg", "check", str(path), "--no-model"],
        capture_output=True, text=True, timeout=120, env=env, cwd=REPO,
    )  # fmt: skip


def test_rows_registered_after_the_config_types_are_refused() -> None:
    import streamseg.config.pipeline  # noqa: F401 - builds the config types: closes the tables

    # The package knows none of this module's rows: only the plug-in adds them.
    assert "jsonfile" not in SINK_TYPES and "tick" not in RULE_KINDS and "shifted" not in DECODERS

    with pytest.raises(RegistryClosed, match="STREAMSEG_PLUGINS"):
        register_rule_kind(RuleKind(TickConfig, f"{HERE}:TickRule", {"tick": "t"}))
    with pytest.raises(RegistryClosed, match=r"streamseg\.config\.pipeline"):
        register_sink_type("jsonfile", SinkType(FileSinkConfig, f"{HERE}:build_file_sink"))
    with pytest.raises(RegistryClosed, match=r"streamseg\.ingest\.config"):
        register_decoder("shifted", DecoderKind(f"{HERE}:ShiftedDecoder"))


def test_check_shows_the_plugin_rows(tmp_path: Path) -> None:
    clip = write_h264(tmp_path / "clip.mp4", frames=2)
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(_pipeline(clip, tmp_path / "out.jsonl", "redis://127.0.0.1:1")))

    done = _check(path, _env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "camera clip: " in done.stdout and "(decode shifted)" in done.stdout
    assert f"sink out (jsonfile): alerts as JSON lines in {tmp_path}/out.jsonl" in done.stdout

    # The sink's own row says it takes snapshots: the console must keep them.
    snapping = _pipeline(clip, tmp_path / "out.jsonl", "redis://127.0.0.1:1", snapshots=True)
    snapping["http"].update(console=True, snapshots=False)
    path.write_text(json.dumps(snapping))
    refused = _check(path, _env())
    assert refused.returncode == 2
    assert "sinks[0].snapshots" in refused.stderr and "http.snapshots" in refused.stderr


def test_serve_runs_the_plugin_rows(tmp_path: Path, redis_server: Any) -> None:
    clip = write_h264(tmp_path / "clip.mp4", frames=30, width=160, height=120)
    out = tmp_path / "out.jsonl"
    config = _pipeline(clip, out, redis_server.url)

    def alerts() -> list[dict[str, Any]]:
        lines = out.read_text().splitlines() if out.exists() else []
        return [json.loads(line) for line in lines]

    with ServeProcess(config, tmp_path, env=_env()) as proc:
        proc.wait_for(lambda: len(alerts()) >= 6, 90, "six tick alerts in the file sink")
    got = alerts()
    assert {(a["rule"], a["kind"], a["camera_id"]) for a in got} == {("beat", "tick", "clip")}
    assert [a["extra"]["frames"] for a in got[:6]] == [5, 10, 15, 20, 25, 30]
    # Every frame came through the plug-in's decoder: its pts is shifted.
    assert all(a["pts"] >= SHIFT for a in got), [a["pts"] for a in got]
