"""A live edit changes only the lines it is about; every other line of pipeline.yaml
stays byte for byte (comments, long lines, quotes, spacing, ``${ENV}``).

The edits are the console's own (``streamseg.console.changes``), applied with
``PipelineEditor`` to real files: the shipped pipeline.yaml with a second
camera's rules (one on a line far longer than 80 characters, the case
where the round trip used to re-wrap it), and a file written in the other
common style (sequences at the parent's indentation, as ``yaml.safe_dump``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamseg.console.changes import _find, _put
from streamseg.console.editor import PipelineEditor, yaml_node
from tests.support.serve import REPO

LONG_RULE = (
    "        - {name: a-rule-whose-line-is-much-longer-than-eighty-characters, type: zone, "
    "zone: left,   classes: [disc, square], min_score: 0.25}   # keep me as I am  "
)
SYNTH_B = f"""    synth-b:
      zones:
        left: {{polygon: [[0, 0], [160, 0], [160, 240], [0, 240]]}}   # the left half
      rules:
{LONG_RULE}
        - name: "quoted-block-rule"
          type: zone
          zone: left
"""

SAFE_DUMP_STYLE = """# written by a script
version: 1
cameras:
- id: a
  url: synthetic://?seed=1&width=160&height=120&fps=8
- id: b
  url: 'synthetic://?seed=2&width=160&height=120&fps=8'
model:
  arch: maskrcnn_small
  weights: none.pth
  missing_weights: random
  device: cpu
alerts:
  cameras:
    b:
      zones:
        left:
          polygon:
          - [0, 0]
          - [80, 0]
          - [80, 120]
          - [0, 120]
      rules:
      - name: in-left
        type: zone
        zone: left
        classes: [disc,square]
redis:
  url: ${REDIS_URL:-redis://127.0.0.1:6379/0}
"""


def shipped(tmp_path: Path) -> Path:
    text = (REPO / "pipeline.yaml").read_text()
    anchor = "    synth-a:\n"
    assert anchor in text
    path = tmp_path / "pipeline.yaml"
    weights = str(REPO / "models" / "demo_small.pth")  # the copy is elsewhere
    text = text.replace("weights: models/demo_small.pth", f"weights: {weights}")
    path.write_text(text.replace(anchor, SYNTH_B + anchor))
    return path


def section_edit(cid: str, action: Callable[[Any], None]) -> Callable[[Any], None]:
    """The console's edit of one camera's alerts section (as ``ChangeAPI._change``)."""

    def edit(tree: Any) -> None:
        cameras = tree.setdefault("alerts", yaml_node({})).setdefault("cameras", yaml_node({}))
        action(cameras.setdefault(cid, yaml_node({})))

    return edit


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """``(lines removed or rewritten, lines added)`` from ``before`` to ``after``."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    gone: list[str] = []
    added: list[str] = []
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag != "equal":
            gone += a[a0:a1]
            added += b[b0:b1]
    return gone, added


RULE = {"name": "enter-left", "type": "zone", "zone": "left", "classes": ["disc"]}


@pytest.mark.parametrize("style", ["shipped", "safe_dump"])
def test_adding_then_removing_a_rule_touches_only_its_lines(tmp_path: Path, style: str) -> None:
    if style == "shipped":
        path, cid = shipped(tmp_path), "synth-b"
    else:
        path, cid = tmp_path / "pipeline.yaml", "b"
        path.write_text(SAFE_DUMP_STYLE)
    editor = PipelineEditor(path, environ={})
    original = path.read_text()

    editor.change(section_edit(cid, lambda s: _put(s, "rules", RULE["name"], RULE)))
    after = path.read_text()
    gone, added = changed_lines(original, after)
    assert gone == [], gone  # not one line of the file was rewritten
    # The new rule only, in the style of the rule before it (a block here).
    assert "enter-left" in added[0] and len(added) == 4, added
    saved = yaml.safe_load(after)["alerts"]["cameras"][cid]["rules"]
    assert saved[-1] == RULE and len(saved) == 3 - (style == "safe_dump")
    if style == "shipped":
        assert LONG_RULE + "\n" in after  # the long line, its spacing and trailing spaces

    # Removing it gives the file back, byte for byte.
    editor.change(
        section_edit(cid, lambda s: s["rules"].__delitem__(_find(s, "rules", "enter-left")))
    )
    assert path.read_text() == original


def test_a_new_camera_section_zone_and_a_replaced_rule(tmp_path: Path) -> None:
    path = shipped(tmp_path)
    editor = PipelineEditor(path, environ={})
    original = path.read_text()
    # A new zone on a camera with a section already: new lines only.
    zone = {"polygon": [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]], "coordinates": "normalized"}
    editor.change(section_edit("synth-a", lambda s: _put(s, "zones", "corner", zone)))
    gone, added = changed_lines(original, path.read_text())
    assert gone == [] and "corner" in "".join(added)
    assert yaml.safe_load(path.read_text())["alerts"]["cameras"]["synth-a"]["zones"]["corner"]
    # A rule added after one-line rules is one line too.
    before = path.read_text()
    rule = {"name": "enter-corner", "type": "zone", "zone": "corner"}
    editor.change(section_edit("synth-a", lambda s: _put(s, "rules", "enter-corner", rule)))
    gone, added = changed_lines(before, path.read_text())
    assert gone == [] and added == ["        - {name: enter-corner, type: zone, zone: corner}\n"], (
        added
    )
    # A rule replaced in place (PUT): its line and nothing else.
    before = path.read_text()
    rule = {"name": "cross-middle", "type": "line", "line": "middle", "cooldown": 2}
    editor.change(section_edit("synth-a", lambda s: _put(s, "rules", "cross-middle", rule)))
    gone, added = changed_lines(before, path.read_text())
    assert len(gone) == 1 and "cross-middle" in gone[0], gone
    assert len(added) == 1 and "cooldown: 2" in added[0], added
    # The comments, the ${ENV} references and the header are where they were.
    text = path.read_text()
    assert text.startswith("# streamseg: the default pipeline.")
    assert "${STREAMSEG_REDIS_URL:-redis://127.0.0.1:6379/0}" in text
    assert "# in = moving right" in text


def test_editing_a_line_the_writer_would_restyle_replaces_just_that_line(tmp_path: Path) -> None:
    path = shipped(tmp_path)
    original = path.read_text()
    name = "a-rule-whose-line-is-much-longer-than-eighty-characters"
    rule = {"name": name, "type": "zone", "zone": "left", "min_score": 0.5}
    PipelineEditor(path, environ={}).change(
        section_edit("synth-b", lambda s: _put(s, "rules", name, rule))
    )
    gone, added = changed_lines(original, path.read_text())
    assert gone == [LONG_RULE + "\n"] and len(added) == 1 and "min_score: 0.5" in added[0]


def remove_camera(cid: str) -> Callable[[Any], None]:
    """The console's DELETE /api/cameras/{cid}: its entry and its alerts section."""

    def edit(tree: Any) -> None:
        cams = tree["cameras"]
        del cams[next(i for i, c in enumerate(cams) if c["id"] == cid)]
        tree["alerts"]["cameras"].pop(cid, None)

    return edit


def test_removing_replacing_and_adding_the_last_camera_keep_the_blank_line(
    tmp_path: Path,
) -> None:
    """The blank line after the last camera (before ``model:``) belongs to what
    follows: removing or replacing that camera keeps it, adding one puts the new
    camera above it, so removing then adding back gives the file back."""
    path = shipped(tmp_path)
    editor = PipelineEditor(path, environ={})
    original = path.read_text()
    entry = yaml.safe_load(original)["cameras"][-1]
    assert entry["id"] == "synth-b" and "    max_fps: 10\n\nmodel:\n" in original

    editor.change(remove_camera("synth-b"))
    after = path.read_text()
    assert "objects=4\n\nmodel:\n" in after, after[:900]
    gone, added = changed_lines(original, after)
    assert added == [] and "  - id: synth-b\n" in gone and "\n" not in gone, gone
    assert "    synth-b:\n" in gone and LONG_RULE + "\n" in gone  # its alerts section too

    editor.change(lambda tree: tree["cameras"].append(yaml_node(entry)))  # as POST
    assert path.read_text() == original.replace(SYNTH_B, "")  # the camera lines, back as they were

    url = "synthetic://?seed=3&width=320&height=240&fps=10&objects=2"
    editor.change(  # as PUT: the entry replaced in place
        lambda tree: tree["cameras"].__setitem__(-1, yaml_node({"id": "synth-b", "url": url}))
    )
    gone, added = changed_lines(original.replace(SYNTH_B, ""), path.read_text())
    assert added == [f"    url: {url}\n"] and len(gone) == 2 and "\n" not in gone, (gone, added)
    assert f"{url}\n\nmodel:\n" in path.read_text()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a:\n  b: 1\nc:\n  - 1\n", (2, 2)),
        ("a:\n    b: 1\nc:\n- 1\n", (4, 0)),
        ("# only a comment\nx: 1\n", (2, 0)),
    ],
)
def test_the_files_own_indentation_is_kept(text: str, expected: tuple[int, int]) -> None:
    from streamseg.console.roundtrip import guess_indent

    assert guess_indent(text) == expected
