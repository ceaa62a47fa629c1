"""A constant-velocity Kalman filter over boxes, batched over tracks with numpy.

State per track (8 floats): ``cx, cy, w, h`` (box centre and size, frame
pixels) and their velocities in pixels per second. Measurements are boxes
``cx, cy, w, h``. The time step is the capture-time gap between two
processed frames, so a dropped frame simply means a longer step.

Noise scales with the box size: the measurement standard deviation is
``MEASURE_STD * (w, h, w, h)``; the process noise adds, per second of
prediction, ``POSITION_STD * size`` to the position and
``VELOCITY_STD * size`` (pixels/second) to the velocity (a random walk).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["KalmanBoxes", "boxes_to_xywh", "xywh_to_boxes"]

F64 = NDArray[np.float64]

MEASURE_STD = 0.05
POSITION_STD = 0.1
VELOCITY_STD = 0.5
INIT_VELOCITY_STD = 1.0  # boxes per second: an unknown new track may move fast
MIN_SIZE = 1.0  # pixels


def boxes_to_xywh(boxes: F64) -> F64:
    """``(N, 4)`` xyxy -> ``(N, 4)`` centre x, centre y, width, height."""
    out = np.empty_like(boxes)
    out[:, 0] = (boxes[:, 0] + boxes[:, 2]) * 0.5
    out[:, 1] = (boxes[:, 1] + boxes[:, 3]) * 0.5
    out[:, 2] = boxes[:, 2] - boxes[:, 0]
    out[:, 3] = boxes[:, 3] - boxes[:, 1]
    return out


def xywh_to_boxes(xywh: F64) -> F64:
    """``(N, 4)`` centre/size -> ``(N, 4)`` xyxy (sizes floored at 1 pixel)."""
    half_w = np.maximum(xywh[:, 2], MIN_SIZE) * 0.5
    half_h = np.maximum(xywh[:, 3], MIN_SIZE) * 0.5
    return np.stack(
        (xywh[:, 0] - half_w, xywh[:, 1] - half_h, xywh[:, 0] + half_w, xywh[:, 1] + half_h),
        axis=1,
    )


def _size_scale(xywh: F64) -> F64:
    """``(N, 4)`` per-coordinate scale ``(w, h, w, h)`` for the noise."""
    w = np.maximum(xywh[:, 2], MIN_SIZE)
    h = np.maximum(xywh[:, 3], MIN_SIZE)
    return np.stack((w, h, w, h), axis=1)


class KalmanBoxes:
    """Means ``(N, 8)`` and covariances ``(N, 8, 8)`` of ``N`` tracks' boxes.

    Rows are added with :meth:`add`, kept or dropped with :meth:`select`;
    :meth:`predict` moves every row forward by ``dt`` seconds and
    :meth:`update` corrects chosen rows with measured boxes.
    """

    def __init__(self) -> None:
        self.mean: F64 = np.zeros((0, 8))
        self.cov: F64 = np.zeros((0, 8, 8))

    def __len__(self) -> int:
        return int(self.mean.shape[0])

    def add(self, boxes: F64) -> None:
        """Append tracks starting at ``boxes (K, 4)`` xyxy, velocity 0 (uncertain)."""
        z = boxes_to_xywh(boxes)
        mean = np.concatenate((z, np.zeros_like(z)), axis=1)
        s = _size_scale(z)
        var = np.concatenate(((2 * MEASURE_STD * s) ** 2, (INIT_VELOCITY_STD * s) ** 2), axis=1)
        cov = np.zeros((len(z), 8, 8))
        idx = np.arange(8)
        cov[:, idx, idx] = var
        self.mean = np.concatenate((self.mean, mean))
        self.cov = np.concatenate((self.cov, cov))

    def select(self, keep: NDArray[np.bool_] | NDArray[np.int64]) -> None:
        """Keep only rows ``keep`` (bool mask or indices), in that order."""
        self.mean = self.mean[keep]
        self.cov = self.cov[keep]

    def predict(self, dt: float, frozen_size: NDArray[np.bool_] | None = None) -> None:
        """Advance all rows by ``dt`` seconds (``dt <= 0``: no motion, no added noise).

        ``frozen_size`` (bool ``(N,)``) zeroes the size velocity of those rows
        first (lost tracks should not keep growing or shrinking).
        """
        if len(self) == 0 or dt <= 0:
            return
        if frozen_size is not None and frozen_size.any():
            self.mean[frozen_size, 6:] = 0.0
        m, p = self.mean, self.cov
        m[:, :4] += dt * m[:, 4:]
        # P' = F P F^T with F = [[I, dt I], [0, I]], done block-wise.
        a, b, c = p[:, :4, :4], p[:, :4, 4:], p[:, 4:, 4:]
        bt = p[:, 4:, :4]
        new_a = a + dt * (b + bt) + (dt * dt) * c
        new_b = b + dt * c
        p[:, :4, :4] = new_a
        p[:, :4, 4:] = new_b
        p[:, 4:, :4] = np.swapaxes(new_b, 1, 2)
        s = _size_scale(m[:, :4])
        idx = np.arange(4)
        p[:, idx, idx] += (POSITION_STD * s) ** 2 * dt
        p[:, idx + 4, idx + 4] += (VELOCITY_STD * s) ** 2 * dt

    def update(self, rows: NDArray[np.int64], boxes: F64) -> None:
        """Correct rows ``rows (K,)`` with measured ``boxes (K, 4)`` xyxy."""
        if len(rows) == 0:
            return
        z = boxes_to_xywh(boxes)
        m, p = self.mean[rows], self.cov[rows]
        r = (MEASURE_STD * _size_scale(m[:, :4])) ** 2
        s = p[:, :4, :4].copy()
        idx = np.arange(4)
        s[:, idx, idx] += r
        # K = P H^T S^-1, with H = [I 0]: P H^T is P's first four columns.
        pht = p[:, :, :4]
        gain = np.linalg.solve(s, np.swapaxes(pht, 1, 2))  # (K, 4, 8) = S^-1 H P
        gain = np.swapaxes(gain, 1, 2)  # (K, 8, 4)
        innov = z - m[:, :4]
        self.mean[rows] = m + np.einsum("kij,kj->ki", gain, innov)
        self.cov[rows] = p - np.einsum("kij,kjl->kil", gain, p[:, :4, :])

    def boxes(self) -> F64:
        """Current estimates as ``(N, 4)`` xyxy."""
        return xywh_to_boxes(self.mean[:, :4])
