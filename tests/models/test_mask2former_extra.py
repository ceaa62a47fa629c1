"""Mask2Former's extra: the default setup installs it for the shipped configs, and
where it is missing the error says to install it, not that the weights are bad."""

from __future__ import annotations

import re
import sys
import tomllib

import pytest
from ruamel.yaml import YAML

from streamseg.errors import StartupError
from streamseg.models import arch_family
from streamseg.models.mask2former.config import MissingTransformersError
from streamseg.models.trained import load_trained_model
from tests.conftest import REPO

INSTALL = "install the extra: pip install 'streamseg[mask2former]'"


def setup_extras() -> list[set[str]]:
    """The extras ``scripts/setup.sh`` installs: without and with ``--dev``."""
    text = (REPO / "scripts" / "setup.sh").read_text()
    found = re.findall(r'extras="\[([a-z0-9,-]*)\]"', text)
    assert len(found) == 2, found
    return [set(f.split(",")) for f in found]


def shipped_archs() -> dict[str, str]:
    """file -> ``model.arch`` of every shipped pipeline and training config."""
    files = [REPO / "pipeline.yaml", *REPO.glob("configs/*.yaml"), *REPO.glob("examples/*.yaml")]
    archs = {}
    for path in files:
        model = (YAML(typ="safe").load(path.read_text()) or {}).get("model") or {}
        if "arch" in model:
            archs[path.name] = model["arch"]
    return archs


def test_the_default_setup_installs_what_every_shipped_config_needs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    archs = shipped_archs()
    assert archs["panoptic_tiny.yaml"] == "mask2former_tiny" and "panoptic.yaml" in archs
    needed = {arch_family(a) for a in archs.values()} & extras  # a family with its own extra
    assert needed == {"mask2former"}
    for installed in setup_extras():
        assert needed <= installed, installed


def test_a_missing_extra_is_told_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` fails
    weights = str(REPO / "models" / "panoptic_tiny.pth")
    with pytest.raises(MissingTransformersError) as info:
        load_trained_model(weights, arch="mask2former_tiny")
    exc = info.value
    assert isinstance(exc, StartupError) and isinstance(exc, ImportError)
    line = exc.describe()  # what check and serve print
    assert line.startswith("model.arch: Mask2Former needs the `transformers` package"), line
    assert INSTALL in line
    assert "weights" not in line.split("(")[0] and "cannot be loaded" not in line
