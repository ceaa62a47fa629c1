"""Line crossing: direction, hysteresis, endpoints, dropped frames, lost tracks, filters."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.tracking import Driver, alerts, box_at, kinds

# A horizontal line drawn left to right at y = 50 from x = 20 to x = 180.
# Its right-hand side (looking from the first point to the second) is below
# it on screen, so with in_side: right moving down is line_in.
LINE = {"points": [[20.0, 50.0], [180.0, 50.0]]}


def line_driver(rule: dict[str, Any] | None = None, line: dict[str, Any] | None = None,
                **kw: Any) -> Driver:  # fmt: skip
    spec = {"name": "count", "type": "line", "line": "door", **(rule or {})}
    config = alerts([spec], lines={"door": {**LINE, **(line or {})}})
    kw.setdefault("given_ids", True)
    return Driver(config, **kw)


def vertical(*ys: float, x: float = 100.0) -> list[list[float] | None]:
    """Boxes of one object whose anchor (bottom centre) is at ``(x, y)`` per frame."""
    return [box_at(x, y) for y in ys]


@pytest.mark.parametrize(
    ("in_side", "ys", "expected"),
    [
        ("right", (30, 40, 60, 70), "line_in"),  # downwards onto the right-hand side
        ("right", (70, 60, 40, 30), "line_out"),
        ("left", (30, 40, 60, 70), "line_out"),
        ("left", (70, 60, 40, 30), "line_in"),
    ],
)
def test_direction(in_side: str, ys: tuple[float, ...], expected: str) -> None:
    d = line_driver(line={"in_side": in_side})
    events = d.run([vertical(*ys)])
    assert kinds(events) == [(expected, 1)]
    e = events[0]
    assert e.line == "door" and e.rule == "count" and e.zone is None
    assert e.count == 1 and e.frame_seq == 2 and e.camera_id == "cam"
    assert e.label == 1 and e.label_name == "person"


def test_running_counts_over_tracks() -> None:
    d = line_driver()
    down = vertical(30, 70)
    up = [None, None, *vertical(70, 30)]
    events = d.run([down, vertical(35, 45, 65), up])
    assert kinds(events) == [("line_in", 1), ("line_in", 2), ("line_out", 3)]
    assert [e.count for e in events] == [1, 2, 1]
    assert [dict(e.extra) for e in events] == [
        {"in": 1, "out": 0},
        {"in": 2, "out": 0},
        {"in": 2, "out": 1},
    ]


def test_jitter_inside_the_band_never_counts() -> None:
    # band 2 px: the anchor wobbles across the line within +-2 px, many times.
    d = line_driver({"band": 2.0})
    wobble = [50 + (1.5 if i % 2 else -1.5) for i in range(20)]
    assert d.run([vertical(40, *wobble, 40)]) == []


def test_jitter_across_the_line_after_a_crossing_counts_once() -> None:
    d = line_driver({"band": 3.0})
    # crosses (40 -> 55), then hovers on and around the line, ends below.
    ys = (40, 55, 51, 48, 52, 49, 50, 53, 47.5, 56, 60)
    assert kinds(d.run([vertical(*ys)])) == [("line_in", 1)]


def test_touch_and_return_is_not_a_crossing() -> None:
    d = line_driver({"band": 2.0})
    # Steps onto the line (and 1 px beyond), then goes back where it came from.
    assert d.run([vertical(30, 50, 51, 40, 30)]) == []


def test_band_zero_counts_a_crossing_through_the_line() -> None:
    d = line_driver({"band": 0.0})
    assert kinds(d.run([vertical(49.5, 50.5)])) == [("line_in", 1)]


@pytest.mark.parametrize("x", [20.0, 180.0])
def test_crossing_exactly_through_an_endpoint_counts(x: float) -> None:
    d = line_driver()
    assert kinds(d.run([vertical(30, 70, x=x)])) == [("line_in", 1)]


@pytest.mark.parametrize("x", [19.0, 181.0])
def test_passing_beyond_an_endpoint_does_not_count(x: float) -> None:
    d = line_driver()
    # It goes round the end of the line: no crossing, and its side is now
    # "below", so coming back up through the segment is a line_out.
    events = d.run([[*vertical(30, 70, x=x), *vertical(70, 30, x=100)]])
    assert kinds(events) == [("line_out", 1)]


def test_diagonal_path_through_an_endpoint() -> None:
    d = line_driver()
    # From (10, 40) to (30, 60): passes exactly through the endpoint (20, 50).
    events = d.run([[box_at(10, 40), box_at(30, 60)]])
    assert kinds(events) == [("line_in", 1)]


def test_dropped_frames_between_two_positions_count_once() -> None:
    d = line_driver()
    assert d.step([box_at(100, 20)], ids=[1]) == []
    d.skip(7)  # frames dropped while the object crossed
    assert kinds(d.step([box_at(100, 80)], ids=[1])) == [("line_in", 1)]
    d.skip(3)
    assert d.step([box_at(100, 85)], ids=[1]) == []


def test_dropped_frames_landing_on_the_line_then_beyond() -> None:
    d = line_driver({"band": 2.0})
    d.step([box_at(100, 20)], ids=[1])
    d.skip(4)
    assert d.step([box_at(100, 50.5)], ids=[1]) == []  # on the line: not yet
    d.skip(4)
    assert kinds(d.step([box_at(100, 80)], ids=[1])) == [("line_in", 1)]


def test_track_that_appears_on_the_line_is_not_counted() -> None:
    d = line_driver({"band": 2.0})
    assert d.run([vertical(50, 51, 60, 70)]) == []


def test_track_appearing_on_one_side_then_crossing() -> None:
    d = line_driver()
    assert kinds(d.run([vertical(45, 55)])) == [("line_in", 1)]


def test_crossing_while_the_track_was_still_tentative_counts() -> None:
    # ByteTracker with confirm_hits 2: the object crosses between its first
    # (tentative) frame and the frame it is confirmed in.
    d = line_driver(given_ids=False, confirm_hits=2)
    assert d.step([box_at(100, 40, 40, 40)]) == [] and d.ids() == [-1]
    events = d.step([box_at(100, 56, 40, 40)])
    assert d.ids() == [1] and kinds(events) == [("line_in", 1)]


def test_lost_then_found_on_the_other_side_counts_once() -> None:
    d = line_driver(given_ids=False, max_lost_seconds=1.0)
    path: list[list[float] | None] = [box_at(100, 20 + 4 * i) for i in range(5)]  # y 20..36
    path += [None] * 5  # hidden 0.5 s while crossing at 4 px/frame
    path += [box_at(100, 60 + 4 * i) for i in range(5)]
    events = d.run([path])
    assert kinds(events) == [("line_in", 1)]
    assert d.ids() == [1]


def test_class_and_score_filters() -> None:
    d = line_driver({"classes": ["car"], "min_score": 0.5})
    ys = (30, 70)
    events = d.run(
        [vertical(*ys, x=40), vertical(*ys, x=80), vertical(*ys, x=120)],
    )
    assert events == []  # every object is a person (label 1)
    d = line_driver({"classes": ["car"], "min_score": 0.5})
    for y in ys:
        events = d.step(
            [box_at(40, y), box_at(80, y), box_at(120, y)],
            ids=[1, 2, 3],
            labels=[2, 2, 1],
            scores=[0.9, 0.3, 0.9],
        )
    assert kinds(events) == [("line_in", 1)]  # the sure car only
    assert events[0].label_name == "car"


def test_unknown_class_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"alerts\.cameras\.cam\.count: unknown class 'bus'"):
        line_driver({"classes": ["bus"]})


def test_cooldown_suppresses_repeated_crossings_of_one_track() -> None:
    d = line_driver({"cooldown": 2.0})
    # in (t=0.1), out (t=0.2), in again (t=0.3: within 2 s of the first in)
    events = d.run([vertical(30, 70, 30, 70)])
    assert kinds(events) == [("line_in", 1), ("line_out", 1)]
    assert [e.count for e in events] == [1, 1]
    d.skip(20)  # 2 s later the same crossing counts again
    events = d.step([box_at(100, 30)], ids=[1]) + d.step([box_at(100, 70)], ids=[1])
    assert kinds(events) == [("line_out", 1), ("line_in", 1)]
    assert [e.count for e in events] == [2, 2]


def test_only_the_chosen_kinds_are_emitted_but_both_are_counted() -> None:
    d = line_driver({"events": ["line_out"]})
    events = d.run([vertical(30, 70, 30)])
    assert kinds(events) == [("line_out", 1)]
    assert dict(events[0].extra) == {"in": 1, "out": 1}


def test_normalized_line() -> None:
    line = {"points": [[0.1, 0.5], [0.9, 0.5]], "coordinates": "normalized"}
    assert kinds(line_driver(line=line).run([vertical(30, 70)])) == [("line_in", 1)]
    # x = 10 px is left of the line's start at 0.1 * 200 = 20 px
    assert line_driver(line=line).run([vertical(30, 70, x=10)]) == []


def test_anchor_choice() -> None:
    # A 10 px tall box moving down 8 px: its top reaches the line one frame
    # after its bottom does.
    d = line_driver({"anchor": "top_center", "band": 0.0})
    events = d.run([vertical(46, 54, 62)])
    assert [e.frame_seq for e in events] == [2]
    d = line_driver({"anchor": "bottom_center", "band": 0.0})
    assert [e.frame_seq for e in d.run([vertical(46, 54, 62)])] == [1]


def test_few_paths_are_tested_like_many() -> None:
    """``Segment.touched_by`` answers row by row in Python floats for a few paths and
    with numpy for many: both give the same answers, edge cases included."""
    import numpy as np

    from streamseg.geometry import FEW_PATHS, Segment

    rng = np.random.default_rng(3)
    segment = Segment((10.0, 20.0), (50.0, 60.0))
    # Whole pixels (many exact touches) and fractions.
    starts = rng.uniform(0, 70, (400, 2))
    ends = rng.uniform(0, 70, (400, 2))
    starts[::2], ends[::2] = starts[::2].round(), ends[::2].round()
    # Paths ending on the segment, through an endpoint, along it, of zero length, NaN.
    starts[:6] = [[10, 20], [0, 20], [30, 40], [5, 5], [30, 40], [np.nan, 1]]
    ends[:6] = [[0, 0], [20, 20], [60, 70], [5, 5], [30, 40], [30, 40]]
    many = segment.touched_by(starts, ends)
    one_by_one = np.concatenate(
        [segment.touched_by(starts[i : i + 1], ends[i : i + 1]) for i in range(len(starts))]
    )
    assert len(starts) > FEW_PATHS
    assert many[:6].tolist() == [True, True, True, False, True, False]
    assert one_by_one.tolist() == many.tolist()
    assert 50 < int(many.sum()) < 350  # both outcomes well represented
