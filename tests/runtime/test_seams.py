"""The service's parts are seams, not reach-ins: no file imports another in a circle.

``runtime``'s parts (cameras served, the console's backend, the sinks'
feeds) are given what they read and never import ``runtime/service.py``;
``hosting``'s parent side imports the child's entry point, never the other
way round. Function-level and ``TYPE_CHECKING`` imports count: a circle
through them is still a circle to the reader.

:class:`ServedCameras` before the pipeline exists: a change is only a change
of the list, refused as it would be while running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.ingest.config import CameraConfig
from streamseg.runtime.camera_changes import ServedCameras
from tests.test_layers import PACKAGE, imported_modules


def _module(path: Path, root: Path) -> str:
    parts = ["streamseg", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def file_circles(package: str, root: Path = PACKAGE) -> list[list[str]]:
    """Every circle of imports among the files of ``streamseg.<package>`` (under ``root``)."""
    files = sorted((root / package).rglob("*.py"))
    modules = {_module(f, root): f for f in files}
    edges = {
        m: sorted({name for _line, name in imported_modules(f, root) if name in modules} - {m})
        for m, f in modules.items()
    }
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in edges[m]:
            if state.get(n) == 1:
                circles.append([*path[path.index(n) :], n])
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in modules:
        if m not in state:
            visit(m, [m])
    return circles


@pytest.mark.parametrize("package", ["runtime", "hosting"])
def test_no_file_imports_another_in_a_circle(package: str) -> None:
    assert file_circles(package) == []


def test_the_check_finds_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "loop"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from streamseg.loop.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from streamseg.loop import a\n")
    assert file_circles("loop", tmp_path) == [
        ["streamseg.loop.a", "streamseg.loop.b", "streamseg.loop.a"]
    ]


def _cam(cid: str, seed: int = 1) -> CameraConfig:
    return CameraConfig(id=cid, url=f"synthetic://?seed={seed}&width=64&height=48&fps=5")


def test_cameras_change_as_a_list_before_the_pipeline_exists() -> None:
    opened: list[str] = []
    served = ServedCameras(
        [_cam("a"), _cam("b")], opener=lambda cams: opened.extend(c.id for c in cams) or {}
    )
    served.start_camera(_cam("c"))
    served.replace_camera(_cam("a", seed=2))
    served.stop_camera("b")
    assert [(c.id, c.url.split("seed=")[1][0]) for c in served.cameras] == [("a", "2"), ("c", "1")]
    assert served.camera_states() == {"a": "connecting", "c": "connecting"}
    assert opened == []  # nothing is opened before the pipeline is built
    with pytest.raises(ValueError, match="already served"):
        served.start_camera(_cam("a"))
    with pytest.raises(KeyError):
        served.stop_camera("b")
    with pytest.raises(KeyError):
        served.replace_camera(_cam("b"))
    served.cameras.clear()  # a copy: the served list is the part's own
    assert [c.id for c in served.cameras] == ["a", "c"]
