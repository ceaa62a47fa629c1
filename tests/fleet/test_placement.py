"""Rendezvous placement: stable, within capacity, and moving only what it must."""

from __future__ import annotations

import pytest

from streamseg.fleet.placement import place

CAMERAS = [f"cam{i}" for i in range(60)]


def test_every_camera_goes_to_one_live_worker_within_capacity() -> None:
    workers = {"a": 25, "b": 25, "c": 25}
    out = place(CAMERAS, workers)
    assert set(out) == set(CAMERAS)
    counts = {w: sum(1 for v in out.values() if v == w) for w in workers}
    assert all(counts[w] <= workers[w] for w in workers)
    assert sum(counts.values()) == len(CAMERAS)
    assert min(counts.values()) >= 10  # spread, not piled on one worker


def test_same_facts_same_placement_whatever_the_order() -> None:
    a = place(CAMERAS, {"a": 30, "b": 30, "c": 30})
    b = place(list(reversed(CAMERAS)), {"c": 30, "a": 30, "b": 30})
    assert a == b


@pytest.mark.parametrize("gone", ["a", "b", "c"])
def test_a_worker_leaving_moves_only_its_cameras(gone: str) -> None:
    before = place(CAMERAS, {"a": 60, "b": 60, "c": 60})
    after = place(CAMERAS, {w: 60 for w in "abc" if w != gone})
    moved = {c for c in CAMERAS if before[c] != after[c]}
    assert moved == {c for c in CAMERAS if before[c] == gone}


def test_a_worker_joining_takes_cameras_only_for_itself() -> None:
    before = place(CAMERAS, {"a": 60, "b": 60})
    after = place(CAMERAS, {"a": 60, "b": 60, "c": 60})
    moved = [c for c in CAMERAS if before[c] != after[c]]
    assert moved and all(after[c] == "c" for c in moved)


def test_capacity_binds_then_cameras_wait_unplaced() -> None:
    out = place(CAMERAS[:10], {"a": 3, "b": 4})
    assert sum(1 for v in out.values() if v == "a") == 3
    assert sum(1 for v in out.values() if v == "b") == 4
    assert sum(1 for v in out.values() if v is None) == 3
    assert place(["x"], {}) == {"x": None}
