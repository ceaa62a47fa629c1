"""Zones: enter/exit with hysteresis, vertices, born inside, lost inside, dwell, crowding."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from streamseg.ops import rle_to_mask
from tests.support.tracking import Driver, alerts, box_at, kinds

# A square zone x 60..140, y 20..80 (pixels).
SQUARE = {"polygon": [[60.0, 20.0], [140.0, 20.0], [140.0, 80.0], [60.0, 80.0]]}


def zone_driver(*rules: dict[str, Any], zone: dict[str, Any] | None = None, **kw: Any) -> Driver:
    specs = [{"name": f"r{i}", "zone": "bay", **r} for i, r in enumerate(rules)]
    config = alerts(specs, zones={"bay": zone or SQUARE})
    kw.setdefault("given_ids", True)
    return Driver(config, **kw)


def across(*xs: float, y: float = 50.0) -> list[list[float] | None]:
    """Boxes of one object whose bottom centre is at ``(x, y)`` per frame."""
    return [box_at(x, y) for x in xs]


def test_enter_and_exit() -> None:
    d = zone_driver({"type": "zone"})
    events = d.run([across(40, 50, 70, 100, 130, 150, 170)])
    assert kinds(events) == [("enter", 1), ("exit", 1)]
    enter, leave = events
    assert enter.frame_seq == 2 and enter.zone == "bay" and enter.line is None
    assert dict(enter.extra) == {"occupancy": 1}
    assert leave.frame_seq == 5
    assert dict(leave.extra) == {"seconds_inside": 0.3, "occupancy": 0}


def test_edge_jitter_with_band_does_not_flicker() -> None:
    d = zone_driver({"type": "zone", "band": 3.0})
    # Around the left edge x = 60: within +-2 px, then clearly in, then
    # jitter at the right edge, then clearly out.
    xs = (50, 58, 61, 59, 62, 58.5, 64, 100, 139, 141, 138, 142, 150)
    events = d.run([across(*xs)])
    assert kinds(events) == [("enter", 1), ("exit", 1)]
    assert [e.frame_seq for e in events] == [6, 12]


def test_edge_jitter_without_band_flickers() -> None:
    # The band is what prevents it: with band 0 every step across counts.
    d = zone_driver({"type": "zone", "band": 0.0})
    assert len(d.run([across(50, 61, 59, 61)])) == 3


@pytest.mark.parametrize(
    ("point", "inside"),
    [
        ((60.0, 20.0), True),  # a vertex
        ((140.0, 80.0), True),  # the opposite vertex
        ((100.0, 80.0), True),  # on an edge
        ((59.99, 20.0), False),
        ((140.0, 80.01), False),
    ],
)
def test_boundary_and_vertices_belong_to_the_zone(point: tuple[float, float], inside: bool) -> None:
    d = zone_driver({"type": "zone", "band": 0.0})
    events = d.run([[box_at(30, 50), box_at(*point)]])
    assert kinds(events) == ([("enter", 1)] if inside else [])


def test_path_through_a_vertex_of_a_triangle() -> None:
    # Triangle with its apex at (100, 20); the object walks straight up
    # through the apex: inside below it, outside above it.
    tri = {"polygon": [[100.0, 20.0], [160.0, 80.0], [40.0, 80.0]]}
    d = zone_driver({"type": "zone", "band": 0.0}, zone=tri)
    events = d.run([[box_at(100, y) for y in (60, 40, 20, 10, 5)]])
    assert kinds(events) == [("enter", 1), ("exit", 1)]
    assert [e.frame_seq for e in events] == [0, 3]


def test_concave_zone() -> None:
    # A "U": the notch x 80..120, y 20..60 is outside.
    u = {"polygon": [[60, 20], [80, 20], [80, 60], [120, 60], [120, 20], [140, 20],
                     [140, 80], [60, 80]]}  # fmt: skip
    d = zone_driver({"type": "zone", "band": 0.0, "initial": "skip"}, zone=u)
    events = d.run([across(70, 100, 130, y=40)])
    assert kinds(events) == [("exit", 1), ("enter", 1)]


@pytest.mark.parametrize(("initial", "expected"), [("flag", [("enter", 1)]), ("skip", [])])
def test_track_appearing_inside(initial: str, expected: list[tuple[str, int]]) -> None:
    d = zone_driver({"type": "zone", "initial": initial})
    events = d.run([across(100, 105)])
    assert kinds(events) == expected
    if expected:
        assert dict(events[0].extra) == {"initial": True, "occupancy": 1}
        assert events[0].frame_seq == 0


def test_born_inside_but_confirmed_outside_then_entering_is_a_real_enter() -> None:
    # ByteTracker, confirm_hits 3: first seen just inside the left edge,
    # confirmed after it stepped out, then it walks in: a plain enter.
    d = zone_driver({"type": "zone"}, given_ids=False, confirm_hits=3)
    events = d.run([[box_at(x, 50, 40, 20) for x in (62, 59, 56, 53, 56, 60, 64, 68)]])
    assert d.ids() == [1]
    assert kinds(events) == [("enter", 1)]
    assert dict(events[0].extra) == {"occupancy": 1} and events[0].frame_seq == 5


def test_lost_inside_and_found_again_keeps_state() -> None:
    d = zone_driver(
        {"type": "zone"},
        {"type": "dwell", "seconds": 1.0},
        given_ids=False,
        max_lost_seconds=2.0,
    )
    path: list[list[float] | None] = [box_at(50 + 5 * i, 50, 20, 20) for i in range(5)]
    path += [None] * 8  # hidden 0.8 s at x ~ 70..110
    path += [box_at(110 + 5 * i, 50, 20, 20) for i in range(3)]
    events = d.run([path])
    assert d.ids() == [1]
    # One enter at x = 60; no exit/enter pair around the gap; the dwell time
    # kept running while hidden (entered at t = 0.2, fires at t >= 1.2).
    assert kinds(events) == [("enter", 1), ("dwell", 1)]
    assert events[1].frame_seq == 13
    assert events[1].extra["dwell_seconds"] == pytest.approx(1.1)


def test_lost_inside_and_gone_exits_with_reason_lost() -> None:
    d = zone_driver({"type": "zone"}, given_ids=False, max_lost_seconds=0.5)
    events = d.run([[box_at(x, 50, 20, 20) for x in (50, 60, 70, 80)]])
    assert kinds(events) == [("enter", 1)]
    events = []
    for _ in range(8):
        events += d.step([])
    assert kinds(events) == [("exit", 1)]
    leave = events[0]
    assert leave.extra["reason"] == "lost" and leave.extra["occupancy"] == 0
    assert leave.box == (70.0, 30.0, 90.0, 50.0)  # the last box seen
    assert leave.frame_seq == 9  # first frame more than 0.5 s after t = 0.3


def test_exit_on_lost_off() -> None:
    d = zone_driver({"type": "zone", "exit_on_lost": False}, given_ids=False, max_lost_seconds=0.15)
    d.run([[box_at(x, 50, 20, 20) for x in (50, 60, 70, 80)]])
    assert all(d.step([]) == [] for _ in range(5))


def test_dropped_frames_enter_counted_once() -> None:
    d = zone_driver({"type": "zone"})
    d.step([box_at(40, 50)], ids=[1])
    d.skip(5)
    assert kinds(d.step([box_at(100, 50)], ids=[1])) == [("enter", 1)]
    d.skip(5)
    assert d.step([box_at(110, 50)], ids=[1]) == []
    d.skip(5)
    assert kinds(d.step([box_at(170, 50)], ids=[1])) == [("exit", 1)]


def test_zone_cooldown_and_event_choice() -> None:
    d = zone_driver({"type": "zone", "cooldown": 1.0, "events": ["enter"]})
    events = d.run([across(40, 100, 40, 100)])
    assert kinds(events) == [("enter", 1)]  # the second enter is within 1 s
    d.skip(10)
    assert d.step([box_at(40, 50)], ids=[1]) == []  # exits are not wanted
    assert kinds(d.step([box_at(100, 50)], ids=[1])) == [("enter", 1)]


def test_zone_filters() -> None:
    d = zone_driver({"type": "zone", "classes": ["dog"], "min_score": 0.6})
    events: list[Any] = []
    for x in (40, 100):
        events += d.step(
            [box_at(x, 50), box_at(x, 60), box_at(x, 70)],
            ids=[1, 2, 3],
            labels=[3, 3, 1],
            scores=[0.9, 0.5, 0.9],
        )
    assert kinds(events) == [("enter", 1)]


def test_dwell_once_per_visit_and_repeat() -> None:
    d = zone_driver({"type": "dwell", "seconds": 0.5})
    events = d.run([across(40, *([100] * 15), 170, 100, *([100] * 6))])
    # In at t = 0.1; dwell at t = 0.6; out at 1.6; in again at 1.7, dwell at 2.2.
    assert kinds(events) == [("dwell", 1), ("dwell", 1)]
    assert [e.frame_seq for e in events] == [6, 22]
    assert events[0].extra["dwell_seconds"] == pytest.approx(0.5)
    d = zone_driver({"type": "dwell", "seconds": 0.5, "repeat": 0.4})
    events = d.run([across(40, *([100] * 15))])
    assert [e.frame_seq for e in events] == [6, 10, 14]


def test_dwell_cooldown_spans_visits() -> None:
    d = zone_driver({"type": "dwell", "seconds": 0.2, "cooldown": 5.0})
    events = d.run([across(40, 100, 100, 100, 170, 100, 100, 100, 100)])
    assert [e.frame_seq for e in events] == [3]  # the second visit is within 5 s


def test_dwell_counts_from_first_sighting_for_a_track_born_inside() -> None:
    d = zone_driver({"type": "dwell", "seconds": 0.3})
    events = d.run([across(100, 101, 102, 103, 104)])
    assert [e.frame_seq for e in events] == [3]
    assert events[0].extra["since"] == pytest.approx(1000.0)


def test_crowding_threshold_hysteresis_and_duration() -> None:
    d = zone_driver({"type": "crowding", "max_occupancy": 2})
    out, inside = box_at(20, 50), [box_at(80 + 10 * k, 50) for k in range(4)]

    def frame(n_inside: int) -> list[Any]:
        boxes = inside[:n_inside] + [out] * (4 - n_inside)
        return d.step(boxes, ids=[1, 2, 3, 4])

    assert frame(2) == []
    events = frame(3)
    assert [(e.kind, e.count, e.track_id) for e in events] == [("crowding", 3, None)]
    assert events[0].extra == {"track_ids": [1, 2, 3], "max_occupancy": 2}
    assert frame(4) == [] and frame(3) == []  # still crowded: no repeat
    events = frame(2)  # clear_occupancy defaults to max_occupancy - 1 = 1
    assert events == []
    events = frame(1)
    assert [(e.kind, e.count) for e in events] == [("crowding_end", 1)]
    assert events[0].extra == {"seconds": pytest.approx(0.4)}  # crowded from t = 0.1 to 0.5
    d2 = zone_driver({"type": "crowding", "max_occupancy": 1, "min_duration": 0.3})
    many = [box_at(80, 50), box_at(100, 50)]
    seqs = [(k, d2.step(many, ids=[1, 2])) for k in range(5)]
    assert [k for k, ev in seqs if ev] == [3]  # crowded from t = 0, event at t >= 0.3


def test_crowding_cooldown() -> None:
    d = zone_driver({"type": "crowding", "max_occupancy": 0, "cooldown": 1.0})
    inside, out = [box_at(100, 50)], [box_at(20, 50)]
    got = [d.step(b, ids=[1]) for b in (inside, out, inside, out)]
    assert [[e.kind for e in ev] for ev in got] == [["crowding"], ["crowding_end"], [], []]


def rect_mask(x1: int, y1: int, x2: int, y2: int) -> torch.Tensor:
    m = torch.zeros((100, 200), dtype=torch.bool)
    m[y1:y2, x1:x2] = True
    return m


@pytest.mark.parametrize("mask_crops", [False, True])
def test_anchor_versus_mask_fraction(mask_crops: bool) -> None:
    # The box's bottom centre is inside the zone, but its mask is an L whose
    # pixels lie mostly left of the zone.
    box = [20.0, 30.0, 100.0, 70.0]  # bottom centre (60, 70): on the left edge
    mask = rect_mask(20, 30, 60, 70) | rect_mask(60, 66, 100, 70)
    frac_in = float(mask[:, 60:140].sum() / mask.sum())
    assert frac_in < 0.2
    by_anchor = zone_driver({"type": "zone"})
    by_mask = zone_driver({"type": "zone", "mask_fraction": 0.5}, mask_crops=mask_crops)
    for d in (by_anchor, by_mask):
        d.step([box_at(20, 50)], ids=[1], masks=rect_mask(15, 40, 25, 50)[None])
    assert kinds(by_anchor.step([box], ids=[1], masks=mask[None])) == [("enter", 1)]
    assert by_mask.step([box], ids=[1], masks=mask[None]) == []
    # Most of the mask in the zone: in by mask share.
    mask2 = rect_mask(70, 30, 130, 70)
    events = by_mask.step([[70.0, 30.0, 130.0, 70.0]], ids=[1], masks=mask2[None])
    assert kinds(events) == [("enter", 1)]
    assert events[0].mask_rle is not None and events[0].mask_rle["size"] == [100, 200]
    assert torch.equal(rle_to_mask(events[0].mask_rle), mask2)


@pytest.mark.parametrize("mask_crops", [False, True])
def test_mask_fraction_hysteresis(mask_crops: bool) -> None:
    d = zone_driver({"type": "zone", "mask_fraction": 0.5, "mask_band": 0.2}, mask_crops=mask_crops)
    # A 40 px wide mask sliding over the zone's left edge x = 60: the share
    # inside is (x2 - 60) / 40.
    shares = [0.0, 0.6, 0.4, 0.35, 0.55, 0.25, 0.6]
    got = []
    for s in shares:
        x2 = int(60 + 40 * s)
        mask = rect_mask(x2 - 40, 30, x2, 70)[None]
        got.append([e.kind for e in d.step([[x2 - 40, 30, x2, 70]], ids=[1], masks=mask)])
    # in at 0.6; stays down to 0.3 (0.5 - 0.2); out at 0.25; in at 0.6.
    assert got == [[], ["enter"], [], [], [], ["exit"], ["enter"]]


def test_normalized_zone() -> None:
    zone = {"polygon": [[0.3, 0.2], [0.7, 0.2], [0.7, 0.8], [0.3, 0.8]]}
    d = zone_driver({"type": "zone"}, zone={**zone, "coordinates": "normalized"})
    assert kinds(d.run([across(40, 100, 150)])) == [("enter", 1), ("exit", 1)]
    config = alerts(
        [{"name": "z", "type": "zone", "zone": "bay"}],
        zones={"bay": zone},
        coordinates="normalized",
    )
    d = Driver(config, given_ids=True)
    assert kinds(d.run([across(40, 100, 150)])) == [("enter", 1), ("exit", 1)]


def test_normalized_points_outside_unit_square_are_rejected() -> None:
    with pytest.raises(ValueError, match="normalized coordinates but has points outside"):
        alerts([], zones={"bay": {**SQUARE, "coordinates": "normalized"}})


def test_occupancy_is_reported() -> None:
    d = zone_driver({"type": "zone"})
    d.step([box_at(100, 50), box_at(110, 50), box_at(20, 50)], ids=[1, 2, 3])
    obs = list(d.stage.occupancy_observations())
    assert obs == [(2, {"camera": "cam", "rule": "r0", "zone": "bay"})]


def test_rules_sharing_a_zone_state_fire_as_each_alone() -> None:
    """Zone, dwell and crowding rules on one zone with the same test and filters share
    their inside states (stepped once per frame); another filter keeps its own. Each
    fires as it does on its own, removed tracks and occupancies included."""
    rules = [
        {"type": "zone"},
        {"type": "crowding", "max_occupancy": 3},
        {"type": "dwell", "seconds": 0.3},
        {"type": "zone", "min_score": 0.8},
        {"type": "zone", "band": 4.0},
    ]
    gen = torch.Generator().manual_seed(3)
    x = torch.rand(6, generator=gen) * 160 + 20  # six objects walking about
    frames = []
    for _ in range(60):
        x = (x + torch.randn(6, generator=gen) * 12).clamp(10, 190)
        seen = torch.nonzero(torch.rand(6, generator=gen) < 0.7)[:, 0].tolist()
        scores = (torch.rand(len(seen), generator=gen) * 0.5 + 0.5).tolist()
        boxes = [box_at(float(x[k]), 50, 20, 20) for k in seen]
        frames.append((boxes, scores, [k + 1 for k in seen]))

    def run(specs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        d = zone_driver(*specs, given_ids=True, max_lost_seconds=0.15)
        out = []
        for boxes, scores, ids in frames:
            for e in d.step(boxes, scores=scores, ids=ids):
                out.append((e.frame_seq, e.rule, e.kind, e.track_id, e.count, dict(e.extra)))
        return out

    together = run(rules)
    alone = []
    for i, spec in enumerate(rules):
        # Name each rule as in the shared run (r0, r1, ...) to compare events.
        d_events = run([{"type": "zone", "classes": ["dog"]}] * i + [spec])
        alone += [e for e in d_events if e[1] == f"r{i}"]
    assert {e[2] for e in together} >= {"enter", "exit", "crowding", "crowding_end", "dwell"}
    assert any(e[5].get("reason") == "lost" for e in together)
    # The shared run's order: by frame, then by rule.
    assert together == sorted(alone, key=lambda e: (e[0], int(e[1][1:])))
    driver = zone_driver(*rules)
    driver.step([box_at(100, 50)], ids=[1])
    shared = driver.stage.cameras["cam"].rules
    assert shared is not None
    assert len({id(getattr(r, "state")) for r in shared.rules}) == 3  # noqa: B009


def test_a_removed_camera_is_forgotten_by_the_gauges_and_the_tracker() -> None:
    d = zone_driver({"type": "zone"})
    d.step([box_at(100, 50)], ids=[1])
    d.step([box_at(100, 50)], ids=[1], camera="other")
    assert {o[1]["camera"] for o in d.stage.track_observations()} == {"cam", "other"}
    d.stage.forget_camera("cam")
    # At once: the gauges leave it out (the track thread may be idle).
    assert [o for o in d.stage.occupancy_observations() if o[1]["camera"] == "cam"] == []
    assert {o[1]["camera"] for o in d.stage.track_observations()} == {"other"}
    d.step([box_at(100, 50)], ids=[1], camera="other")  # the next frame drops its state
    assert set(d.stage.cameras) == {"other"} and d.stage.counts("cam") == {}
    # Added again under the same id, it starts afresh: its track enters again.
    events = d.step([box_at(100, 50)], ids=[1])
    assert kinds(events) == [("enter", 1)]
