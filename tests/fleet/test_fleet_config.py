"""The ``fleet:`` section: defaults, checks, and what it excludes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from streamseg.config import ConfigError, load_pipeline
from streamseg.fleet.config import FleetConfig

BASE = {"cameras": [{"id": "a", "url": "synthetic://?seed=1"}]}


def test_defaults_derive_from_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTNAME", "pod-7f9c")
    f = FleetConfig()
    assert (f.worker_name, f.capacity, f.lease_s, f.guard, f.tick_s) == (
        "pod-7f9c",
        8,
        5.0,
        1.25,
        1.0,
    )
    short = FleetConfig(name="w", lease_s=2)
    assert (short.worker_name, short.guard, short.tick_s) == ("w", 1.0, 0.4)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"lease_s": 4, "guard_s": 4}, "less than lease_s"),
        ({"lease_s": 1}, "greater than or equal to 2"),
        ({"capacity": 0}, "greater than or equal to 1"),
        ({"name": "a b"}, "letters, digits"),
    ],
)
def test_bad_values_are_refused(fields: dict, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match=words):
        FleetConfig(**fields)


def test_pipeline_section_loads_and_unknown_keys_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps({**BASE, "fleet": {"name": "w1", "capacity": 3}}))
    assert load_pipeline(path).fleet == FleetConfig(name="w1", capacity=3)
    path.write_text(json.dumps({**BASE, "fleet": {"name": "w1", "leases": 3}}))
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    assert [i.path for i in info.value.issues] == ["fleet.leases"]
    path.write_text(json.dumps(BASE))
    assert load_pipeline(path).fleet is None


def test_serve_refuses_a_shard_of_a_fleet(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps({**BASE, "fleet": {"name": "w1"}}))
    done = cli("serve", str(path), "--shard", "0/2", timeout=60)
    assert done.returncode == 2
    assert "--shard and a fleet: section exclude each other" in done.stderr
