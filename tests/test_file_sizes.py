"""No module of the package is over ``MAX_LINES`` lines (docs/architecture.md).

A file that grows past it is asking to be split along a real seam (one
class or one stage per module, a subpackage that re-exports its names):
this test names each such file and its length.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.serve import REPO

PACKAGE = REPO / "streamseg"
MAX_LINES = 400


def lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_no_module_is_over_the_limit() -> None:
    sizes = {path.relative_to(PACKAGE).as_posix(): lines(path) for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100  # the package was found
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines (split them along a real seam): {too_long}"


def test_the_limit_is_counted_as_an_editor_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("x = 1\n" * MAX_LINES)
    assert lines(path) == MAX_LINES
    path.write_text("x = 1\n" * MAX_LINES + "y = 2")  # a last line without a newline counts
    assert lines(path) == MAX_LINES + 1
