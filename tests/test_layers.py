"""Stages own their config sections; ``streamseg.config`` assembles them from above.

No stage subpackage imports ``streamseg.config`` (function-level imports
included): a stage's section schema lives in the stage, its builder takes
that section, and ``config`` (the whole pipeline.yaml) sits above every
stage; ``console``, ``runtime``, ``cli`` and ``train`` sit above it and may
read it. The shared bottom of every section, ``streamseg.configbase``, imports nothing
of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "streamseg"

# The stages: none may import streamseg.config.
STAGES = (
    "client",
    "fleet",
    "ingest",
    "models",
    "ops",
    "publish",
    "record",
    "schemas",
    "segment",
    "synthetic",
    "telemetry",
    "track",
)


def imported_modules(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every module ``path`` imports, relative imports resolved
    against its place under ``root`` (the ``streamseg`` folder); ``from A import b`` gives
    ``A.b`` too, since ``b`` may be a module."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    parts = ["streamseg", *path.relative_to(root).with_suffix("").parts]
    package = parts[:-1]  # a module's package; an __init__'s own package
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def config_imports(
    path: Path, root: Path = PACKAGE, *, target: str = "streamseg.config"
) -> list[str]:
    """``file:line: module`` of each import of ``target`` (or a module under it) in ``path``."""
    return [
        f"{path.relative_to(root.parent)}:{line}: {name}"
        for line, name in imported_modules(path, root)
        if name == target or name.startswith(f"{target}.")
    ]


@pytest.mark.parametrize("stage", STAGES)
def test_no_stage_imports_the_config_package(stage: str) -> None:
    files = sorted((PACKAGE / stage).rglob("*.py"))
    assert files, f"streamseg/{stage} has no modules"
    hits = [hit for path in files for hit in config_imports(path)]
    assert hits == [], (
        f"streamseg.{stage} imports streamseg.config (the assembler above the stages); "
        "import the section from its stage, the bottom pieces from streamseg.configbase:\n"
        + "\n".join(hits)
    )


def test_configbase_imports_nothing_of_the_package() -> None:
    hits = [
        f"{path.name}:{line}: {name}"
        for path in sorted((PACKAGE / "configbase").rglob("*.py"))
        for line, name in imported_modules(path)
        if name.startswith("streamseg.") and not name.startswith("streamseg.configbase")
    ]
    assert hits == []


@pytest.mark.parametrize(
    "source",
    [
        "from streamseg.config.pipeline import PipelineConfig\n",
        "import streamseg.config\n",
        "from streamseg import config\n",
        "def f():\n    from ...config import loader\n",
        "from ... import config\n",
    ],
)
def test_the_check_finds_each_form_of_import(tmp_path: Path, source: str) -> None:
    root = tmp_path / "streamseg"
    path = root / "track" / "rules" / "mod.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert config_imports(path, root) != []
    path.write_text("from streamseg.configbase import StrictModel\nfrom ..alerts import X\n")
    assert config_imports(path, root) == []
