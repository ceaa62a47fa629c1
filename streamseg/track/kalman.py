"""A constant-velocity Kalman filter over boxes, batched over tracks with numpy.

State per track (8 floats): ``cx, cy, w, h`` (box centre and size, frame
pixels) and their velocities in pixels per second. Measurements are boxes
``cx, cy, w, h``. The time step is the capture-time gap between two
processed frames, so a dropped frame simply means a longer step.

Noise scales with the box size: the measurement standard deviation is
``MEASURE_STD * (w, h, w, h)`` (a box can be given a larger one for its
size and the velocities, see :meth:`KalmanBoxes.update`); the process
noise adds, per second of prediction, ``POSITION_STD * size`` to the
position and ``VELOCITY_STD * size`` (pixels/second) to the velocity (a
random walk).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MEASURE_STD", "KalmanBoxes", "boxes_to_xywh", "xywh_to_boxes"]

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
    half = np.maximum(xywh[:, 2:4], MIN_SIZE) * 0.5
    centre = xywh[:, :2]
    return np.concatenate((centre - half, centre + half), axis=1)


def _size_scale(xywh: F64) -> F64:
    """``(N, 4)`` per-coordinate scale ``(w, h, w, h)`` for the noise."""
    size = np.maximum(xywh[:, 2:4], MIN_SIZE)
    return np.concatenate((size, size), axis=1)


class KalmanBoxes:
    """Means ``(N, 8)`` and covariances of ``N`` tracks' boxes.

    Rows are added with :meth:`add`, kept or dropped with :meth:`select`;
    :meth:`predict` moves every row forward by ``dt`` seconds and
    :meth:`update` corrects chosen rows with measured boxes.

    The four coordinates never mix: the motion couples each position only
    with its own velocity, and every noise is diagonal. So the ``8 x 8``
    covariance is four independent ``2 x 2`` blocks, kept as one
    ``(N, 3, 4)`` array ``var``: position variance ``pp``, covariance
    ``pv`` and velocity variance ``vv`` of each coordinate. Every step is
    then a few element-wise operations (no matrix inverse), exactly equal
    to the full filter.
    """

    def __init__(self) -> None:
        self.mean: F64 = np.zeros((0, 8))
        self.var: F64 = np.zeros((0, 3, 4))

    def __len__(self) -> int:
        return int(self.mean.shape[0])

    @property
    def cov(self) -> F64:
        """The full ``(N, 8, 8)`` covariances (built on demand; for tests and inspection)."""
        n = len(self)
        out = np.zeros((n, 8, 8))
        i = np.arange(4)
        out[:, i, i] = self.var[:, 0]
        out[:, i, i + 4] = self.var[:, 1]
        out[:, i + 4, i] = self.var[:, 1]
        out[:, i + 4, i + 4] = self.var[:, 2]
        return out

    def add(self, boxes: F64) -> None:
        """Append tracks starting at ``boxes (K, 4)`` xyxy, velocity 0 (uncertain)."""
        z = boxes_to_xywh(boxes)
        s = _size_scale(z)
        var = np.stack(
            ((2 * MEASURE_STD * s) ** 2, np.zeros_like(z), (INIT_VELOCITY_STD * s) ** 2), 1
        )
        self.mean = np.concatenate((self.mean, np.concatenate((z, np.zeros_like(z)), axis=1)))
        self.var = np.concatenate((self.var, var))

    def select(self, keep: NDArray[np.bool_] | NDArray[np.int64]) -> None:
        """Keep only rows ``keep`` (bool mask or indices), in that order."""
        self.mean = self.mean[keep]
        self.var = self.var[keep]

    def predict(self, dt: float, frozen_size: NDArray[np.bool_] | None = None) -> None:
        """Advance all rows by ``dt`` seconds (``dt <= 0``: no motion, no added noise).

        ``frozen_size`` (bool ``(N,)``) zeroes the size velocity of those rows
        first (lost tracks should not keep growing or shrinking).
        """
        if len(self) == 0 or dt <= 0:
            return
        if frozen_size is not None and frozen_size.any():
            self.mean[frozen_size, 6:] = 0.0
        m = self.mean
        m[:, :4] += dt * m[:, 4:]
        # P' = F P F^T with F = [[1, dt], [0, 1]] per coordinate, plus noise.
        s2 = _size_scale(m[:, :4]) ** 2
        pp, pv, vv = self.var[:, 0], self.var[:, 1], self.var[:, 2]
        pp += dt * (2.0 * pv + dt * vv) + (POSITION_STD**2 * dt) * s2
        pv += dt * vv
        vv += (VELOCITY_STD**2 * dt) * s2

    def update(self, rows: NDArray[np.int64], boxes: F64, shape_std: F64 | None = None) -> None:
        """Correct rows ``rows (K,)`` with measured ``boxes (K, 4)`` xyxy.

        ``shape_std (K,)``: a larger measurement standard deviation (a
        fraction of the box size, like ``MEASURE_STD``) for the box's size
        and for the velocities, e.g. for a low-score box that shows only
        the visible piece of a partly hidden object. The centre is still
        corrected as usual (the piece is the best guess of where the object
        is now), but the piece's size, and how its centre moved, change the
        track's size and velocity less. The centre's gain and its
        velocity's then come from different noises: a deliberate departure
        from the exact filter, whose covariance step is kept as is.
        """
        if len(rows) == 0:
            return
        z = boxes_to_xywh(boxes)
        m = self.mean[rows]
        var = self.var[rows]
        pp, pv, vv = var[:, 0], var[:, 1], var[:, 2]
        scale = _size_scale(m[:, :4])
        # Gain per coordinate: K = (pp, pv) / (pp + r).
        if shape_std is None:
            inv = 1.0 / (pp + (MEASURE_STD * scale) ** 2)
            kp, kv = pp * inv, pv * inv
        else:
            std = np.empty_like(scale)  # of the positions: the centre's as usual
            std[:, :2] = MEASURE_STD
            std[:, 2:] = shape_std[:, None]
            kp = pp / (pp + (std * scale) ** 2)
            kv = pv / (pp + (shape_std[:, None] * scale) ** 2)
        innov = z - m[:, :4]
        m[:, :4] += kp * innov
        m[:, 4:] += kv * innov
        self.mean[rows] = m
        vv -= kv * pv  # before pv changes
        keep = 1.0 - kp
        pv *= keep
        pp *= keep
        self.var[rows] = var

    def boxes(self) -> F64:
        """Current estimates as ``(N, 4)`` xyxy."""
        return xywh_to_boxes(self.mean[:, :4])
