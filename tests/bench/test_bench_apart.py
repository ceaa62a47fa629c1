"""The benchmarks sit above the serving code: serving never imports them, nor the scenes.

``streamseg.bench`` holds every benchmark and what only they use (the
emulated GPU, the parity and timing steps of gpu-check); the serving
packages import neither it nor ``streamseg.synthetic``, the scene generator
the benchmarks feed from. Checked on the import graph (function-level
imports included), as ``tests/test_layers.py`` checks the config.
"""

from __future__ import annotations

import pytest

from tests.test_layers import PACKAGE, config_imports

SERVING = ("console", "hosting", "ingest", "publish", "record", "runtime", "segment", "track")

# Serving files that may import the scenes, and why.
SCENES_ALLOWED = frozenset(
    {
        # The ``synthetic://`` camera kind: a source users pick (the default pipeline.yaml).
        "streamseg/ingest/scene_source.py",
        "streamseg/ingest/checks.py",
    }
)


def _imports(stage: str, target: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    files = sorted((PACKAGE / stage).rglob("*.py"))
    assert files, f"streamseg/{stage} has no modules"
    return [
        hit
        for path in files
        if str(path.relative_to(PACKAGE.parent)) not in allowed
        for hit in config_imports(path, target=target)
    ]


@pytest.mark.parametrize("stage", SERVING)
def test_serving_imports_no_benchmark_and_no_scene(stage: str) -> None:
    hits = _imports(stage, "streamseg.bench") + _imports(
        stage, "streamseg.synthetic", SCENES_ALLOWED
    )
    assert hits == [], (
        f"streamseg.{stage} is serving code: benchmarks and what only they use live in "
        "streamseg.bench, which imports the stages, never the other way round:\n" + "\n".join(hits)
    )


def test_the_check_sees_a_function_level_import(tmp_path) -> None:  # type: ignore[no-untyped-def]
    module = tmp_path / "streamseg" / "segment" / "late.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    from streamseg.synthetic.scene import SyntheticScene\n")
    hits = config_imports(module, tmp_path / "streamseg", target="streamseg.synthetic")
    assert "streamseg/segment/late.py:2: streamseg.synthetic.scene" in hits


def test_the_allowed_files_exist() -> None:
    """An allowance outlives its file only by mistake: drop it with the file."""
    missing = [f for f in sorted(SCENES_ALLOWED) if not (PACKAGE.parent / f).is_file()]
    assert missing == []
