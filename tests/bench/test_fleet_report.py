"""``bench fleet``'s figures from the streams: gaps, lost and duplicated frames, overlaps."""

from __future__ import annotations

from streamseg.bench.fleet_report import Sample, camera_phase, overlaps, rate


def run(worker: str, epoch: int, seqs: range, t0: float, fps: float = 4.0) -> list[Sample]:
    return [Sample(worker, epoch, s, t0 + i / fps) for i, s in enumerate(seqs)]


def test_a_camera_that_stays_loses_nothing_unless_seq_skips() -> None:
    steady = run("a", 1, range(40), 0.0)
    r = camera_phase(steady, start=5.0, end=9.0, fps=4.0)
    assert r == {
        "moved": False, "from": "a", "to": "a", "messages": 16, "gap_s": None,
        "silence_s": None, "lost": 0, "duplicated": 0,
    }  # fmt: skip
    holes = [s for s in steady if s.seq not in (22, 23, 30)]
    assert camera_phase(holes, start=5.0, end=9.0, fps=4.0)["lost"] == 3
    twice = [*steady[:25], steady[24], *steady[25:]]
    assert camera_phase(twice, start=5.0, end=9.0, fps=4.0)["duplicated"] == 1


def test_a_moved_camera_gap_and_the_frames_of_its_silence() -> None:
    old = run("a", 1, range(20), 0.0)  # last message at 4.75
    new = run("b", 2, range(0, 20), 7.25)  # 2.5 s of silence: 10 frames at 4 fps, less one
    r = camera_phase([*old, *new], start=5.0, end=20.0, fps=4.0)
    assert r["moved"] and (r["from"], r["to"]) == ("a", "b")
    assert r["gap_s"] == 2.25 and r["silence_s"] == 2.5
    assert r["lost"] == 9 and r["duplicated"] == 0


def test_two_workers_at_once_show_as_an_older_epoch_after_a_newer_one() -> None:
    old = run("a", 1, range(30), 0.0)
    new = run("b", 2, range(10), 6.0)
    interleaved = sorted([*old, *new], key=lambda s: s.published)
    assert overlaps(interleaved) == sum(1 for s in old if s.published > 6.0)
    assert camera_phase(interleaved, start=5.0, end=20.0, fps=4.0)["duplicated"] > 0
    assert overlaps([*old, *new]) == 0
    assert rate(old) == 4.0 and rate(old[:1]) == 0.0
