"""Camera health history: the camera's fps, skipped/s from successive samples, a bounded
window, removed cameras."""

from __future__ import annotations

from streamseg.console.health import FIELDS, HealthHistory


def test_rates_window_and_forgetting() -> None:
    h = HealthHistory(window=10.0, interval=1.0)
    for i in range(30):
        now = 1000.0 + i
        h.sample(
            {
                "a": {"segmented": 8 * i, "skipped": i // 2, "last_frame_time": now - 0.25,
                      "reconnects": 1, "stalls": 0, "fps": 8.0},
                "b": {"segmented": 0, "skipped": 0, "last_frame_time": None},
            },
            now=now,
        )  # fmt: skip
    a = h.series("a")
    assert len(a) == 11  # the window holds 10 s at one sample a second
    point = dict(zip(FIELDS, a[-1], strict=True))
    assert point["fps"] == 8.0 and point["lag_s"] == 0.25 and point["reconnects"] == 1
    assert sum(dict(zip(FIELDS, p, strict=True))["skipped_per_s"] for p in a[-4:]) == 2.0
    assert h.series("b")[-1][FIELDS.index("lag_s")] is None
    h.sample({"a": {"segmented": 240}}, now=1030.0)
    assert h.series("b") == [] and len(h.series("a")) == 11
