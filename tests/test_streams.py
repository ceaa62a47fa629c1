"""The published-stream contract has one owner: ``streamseg/streams.py``.

Every stream and topic name is built there; a string literal in any other
module of the package that spells one (``:detections``, ``/alerts``, ...)
fails here. Docstrings and comments may describe the names; code may not
spell them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from streamseg import streams
from tests.support.serve import REPO

PACKAGE = REPO / "streamseg"
OWNER = PACKAGE / "streams.py"

# Redis: the words after the prefix's colon. MQTT: the words after a slash, in
# anything but the console's HTTP routes (``/api/...``), which are paths.
REDIS = re.compile(r":(detections|alerts|control)\b")
MQTT = re.compile(r"(?<![\w.])/(detections|alerts|available|state|snapshot)(?![\w.])")


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every docstring node (module, class and function docstrings)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def spelled_names(path: Path) -> list[str]:
    """``line: text`` of each string literal in ``path`` (f-string parts too, docstrings not)
    that spells a stream or topic name."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        text = node.value
        if id(node) in docs or text.startswith("/api/"):
            continue
        if REDIS.search(text) or MQTT.search(text):
            where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
            found.append(f"{where}:{node.lineno}: {text!r}")
    return found


def test_no_module_but_streams_spells_a_stream_or_topic_name() -> None:
    spelled = [hit for p in sorted(PACKAGE.rglob("*.py")) if p != OWNER for hit in spelled_names(p)]
    assert spelled == [], "build these names with streamseg.streams:\n" + "\n".join(spelled)


def test_the_check_finds_a_name_spelled_in_code(tmp_path: Path) -> None:
    """The check itself: an f-string spelling a stream is found; a docstring is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Streams ``<prefix>:alerts`` (described, allowed)."""\n'
        "def f(prefix, cam):\n"
        '    """``<prefix>/<camera>/state`` is described here."""\n'
        '    return f"{prefix}:detections:{cam}", f"{prefix}/{cam}/state", "/api/x/alerts"\n'
    )
    hits = spelled_names(sample)
    assert [h.split(": ", 1)[1] for h in hits] == ["':detections:'", "'/state'"]


def test_names_and_parsing_agree() -> None:
    assert streams.detections_stream("p", "gate") == "p:detections:gate"
    assert streams.alerts_stream("p") == "p:alerts"
    assert streams.control_stream("p") == "p:control"
    assert streams.control_status_stream("p") == "p:control:status"
    assert streams.detections_pattern("p") == "p:detections:*"
    for camera in ("gate", "cam.1", "a:b"):  # ids may hold ':' and '.'
        name = streams.detections_stream("site:1", camera)
        assert streams.camera_of_stream("site:1", name) == camera
        assert streams.camera_of_stream("site:1", name.encode()) == camera
    assert streams.camera_of_stream("p", "p:alerts") is None
    assert streams.camera_of_stream("p", "q:detections:gate") is None
    assert streams.camera_of_stream("p", "p:detections:") is None


def test_mqtt_topics() -> None:
    assert streams.mqtt_topic("s/1", "detections", "gate") == "s/1/gate/detections"
    assert streams.mqtt_topic("s/1", "snapshot", "gate") == "s/1/gate/snapshot"
    assert streams.mqtt_topic("s/1", "alert", "gate") == "s/1/alerts"
    assert streams.availability_topic("s/1") == "s/1/available"
    assert streams.state_topic("s/1", "gate") == "s/1/gate/state"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"type": "alert", "rule": "r"}, None),
        ({"stream": "s", "id": "1-0", "message": {"type": "alert"}}, None),
        ([1, 2], "expected a JSON object"),
        ({"type": "detections", "camera": "c"}, "missing 'seq', 'capture_time', 'image'"),
    ],
)
def test_recorded_detections_refuses_what_is_not_one(obj: object, expected: str | None) -> None:
    if expected is None:
        assert streams.recorded_detections(obj, "f:1") is None
        return
    with pytest.raises(streams.RecordingError, match=f"^f:1: .*{re.escape(expected)}"):
        streams.recorded_detections(obj, "f:1")


def test_recorded_detections_unwraps_an_envelope() -> None:
    msg = {f: 0 for f in streams.DETECTIONS_FIELDS}
    wrapped = {"stream": "p:detections:c", "id": "1-0", "message": msg}
    assert streams.recorded_detections(wrapped, "f:1") is msg
    assert streams.recorded_detections(msg, "f:1") is msg
