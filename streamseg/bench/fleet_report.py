"""``bench fleet``'s figures, from what reached the detections streams.

Each detections message of a fleet carries ``worker``, ``epoch`` (its
camera's lease) and ``seq`` (the worker's frame number of the camera). From
the streams alone, in their order, per camera and per phase (the span from
one event, a kill or a cut, to the next):

* ``moved``: a new epoch began in the phase; ``from`` / ``to`` its workers;
* ``gap_s``: for a moved camera, from the event to the new owner's first
  message (what the goals bound); ``silence_s``: from the old owner's last
  message to the new owner's first;
* ``lost``: frames missing: ``seq`` gaps within an epoch, plus, across a
  handover, the camera's frames in the silence (its rate times ``silence_s``,
  less one: an estimate, as the two workers number frames apart);
* ``duplicated``: a ``seq`` published twice in one epoch, and every message
  of an older epoch after a newer one's first (two workers at once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

__all__ = ["Sample", "camera_phase", "overlaps", "rate"]


@dataclasses.dataclass(frozen=True)
class Sample:
    """One detections message: who published it, under which epoch, which frame, when."""

    worker: str | None
    epoch: int | None
    seq: int
    published: float  # unix seconds


def rate(samples: Sequence[Sample]) -> float:
    """Messages per second over ``samples`` (0 for fewer than two)."""
    if len(samples) < 2:
        return 0.0
    span = samples[-1].published - samples[0].published
    return (len(samples) - 1) / span if span > 0 else 0.0


def overlaps(samples: Sequence[Sample]) -> int:
    """Messages whose epoch is older than one already seen (stream order)."""
    newest, count = 0, 0
    for s in samples:
        e = s.epoch or 0
        if e < newest:
            count += 1
        newest = max(newest, e)
    return count


def _seq_faults(samples: Sequence[Sample]) -> tuple[int, int]:
    """``(missing, repeated)`` frame numbers within each epoch."""
    missing = repeated = 0
    last: dict[int | None, int] = {}
    for s in samples:
        prev = last.get(s.epoch)
        if prev is not None:
            if s.seq <= prev:
                repeated += 1
            else:
                missing += s.seq - prev - 1
        last[s.epoch] = max(s.seq, prev if prev is not None else s.seq)
    return missing, repeated


def camera_phase(
    samples: Sequence[Sample], *, start: float, end: float, fps: float
) -> dict[str, Any]:
    """One camera's figures for the phase ``[start, end)`` (unix seconds).

    ``samples``: the camera's messages in stream order, the whole run (the
    epoch it had when the phase began is read from those before ``start``).
    """
    before = [s for s in samples if s.published < start]
    inside = [s for s in samples if start <= s.published < end]
    was = before[-1] if before else None
    first_new = next((s for s in inside if was is None or (s.epoch or 0) > (was.epoch or 0)), None)
    missing, repeated = _seq_faults(inside)
    out: dict[str, Any] = {
        "moved": first_new is not None and was is not None,
        "from": was.worker if was is not None else None,
        "to": (inside[-1].worker if inside else None),
        "messages": len(inside),
        "gap_s": None,
        "silence_s": None,
        "lost": missing,
        "duplicated": repeated + overlaps([*before[-1:], *inside]),
    }
    if first_new is not None and was is not None:
        old = [s for s in [*before, *inside] if s.epoch == was.epoch]
        last_old = old[-1].published
        silence = max(0.0, first_new.published - last_old)
        out.update(
            gap_s=round(first_new.published - start, 3),
            silence_s=round(silence, 3),
            lost=missing + max(0, round(silence * fps) - 1),
        )
    elif first_new is not None:  # first publication of the run
        out["gap_s"] = round(first_new.published - start, 3)
    return out
