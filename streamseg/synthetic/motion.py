"""Where synthetic objects are: closed-form trajectories of random and scripted objects.

Every position is a pure function of the scene time (seconds), so any frame
can be made directly, in any order, with the same result.

Random objects live in ``num_objects`` *slots*. Each slot has its own period
``E`` (15-40 s) and phase; its time line is cut into epochs of length ``E``
and each epoch holds one *life*: an object with a new identity that enters
through a frame edge, crosses the frame 1 to 3 times (bouncing off walls
that may lie a little outside the frame, so objects are sometimes cut by
the border, or a little inside it), then leaves through an edge and is gone
before the epoch ends. A life's parameters come from a generator seeded by
``(seed, slot, epoch)`` and nothing else.

Along its entry axis a life moves monotonically in an *unfolded* coordinate
``q(tau) = q0 + v tau + A (sin(w tau + phi) - sin phi)`` (``v > A w``);
folding ``q`` into the walls gives the bounces. The other axis folds its own
smooth wobbling coordinate. Positions are fractions of the frame's width
and height; sizes are fractions of ``min(height, width)``; so a scene looks
the same at any resolution of the same aspect ratio and at any frame rate.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import threading
from collections.abc import Sequence

import numpy as np

from streamseg.synthetic.sprites import STAR, Appearance, label_id, make_appearance

__all__ = ["ObjectSpec", "Placement", "RandomObjects", "ScriptedObjects"]


@dataclasses.dataclass(frozen=True)
class ObjectSpec:
    """A scripted object: known shape, size and path, for exact alert and tracking tests.

    Attributes:
        label: class name (``"disc"``, ``"square"``, ``"triangle"``,
            ``"star"``) or its id (1..4; ``"hexagon"``, 5, in a scene with ``shapes=5``).
        size: ``(w, h)`` of the object's box in frame pixels.
        path: ``[(t, x, y), ...]``: the box centre ``(x, y)`` in frame pixels
            (continuous coordinates: pixel ``(0, 0)`` covers ``[0, 1)^2``) at
            scene time ``t`` seconds, linearly interpolated between points,
            times strictly increasing. The object exists only from the first
            to the last time (inclusive); a single point means it stands
            still for the whole scene.
        appear / disappear: optional scene times (s); the object is drawn
            only while ``appear <= t < disappear``.
        depth: distance from the camera; a smaller depth is drawn in front.
            Ties: the later object in the list is in front.
        colour: main RGB colour (0..255 each), or ``None`` for a random one.
        track_id: identity in the ground truth (>= 1, unique); default: the
            object's position in the list plus one.
        angle: fixed rotation in degrees (clockwise on screen), default 0.
    """

    label: str | int
    size: tuple[float, float]
    path: Sequence[tuple[float, float, float]]
    appear: float | None = None
    disappear: float | None = None
    depth: float = 0.0
    colour: tuple[int, int, int] | None = None
    track_id: int | None = None
    angle: float = 0.0

    def __post_init__(self) -> None:
        label_id(self.label)
        w, h = self.size
        if not (w > 0 and h > 0 and math.isfinite(w) and math.isfinite(h)):
            raise ValueError(
                f"ObjectSpec.size must be two positive numbers (w, h), got {self.size}"
            )
        if not self.path:
            raise ValueError("ObjectSpec.path needs at least one (t, x, y) point")
        try:
            path = tuple((float(t), float(x), float(y)) for t, x, y in self.path)
        except (TypeError, ValueError):
            path = ()
        if not path or any(b[0] <= a[0] for a, b in itertools.pairwise(path)):
            raise ValueError(
                "ObjectSpec.path must be (t, x, y) points with strictly increasing t, "
                f"got {list(self.path)}"
            )
        object.__setattr__(self, "path", path)
        if self.appear is not None and self.disappear is not None and self.disappear <= self.appear:
            raise ValueError("ObjectSpec.disappear must be later than appear")
        if self.colour is not None and (
            len(self.colour) != 3 or any(not 0 <= c <= 255 for c in self.colour)
        ):
            raise ValueError(f"ObjectSpec.colour must be (r, g, b) in 0..255, got {self.colour}")
        if self.track_id is not None and self.track_id < 1:
            raise ValueError(f"ObjectSpec.track_id must be >= 1, got {self.track_id}")


@dataclasses.dataclass(frozen=True)
class Placement:
    """One object at one instant, in frame pixels.

    Attributes:
        key: identifies the object's sprite (stable for its whole life).
        track_id: identity (>= 1).
        label: class id.
        cx / cy: centre of its box, continuous pixel coordinates.
        width / height: its box at scale 1, pixels.
        scale: current size factor; max_scale: its largest over the life.
        angle: rotation in radians (clockwise on screen).
        depth: smaller is nearer (drawn in front); order breaks ties.
        appearance: colours and texture.
    """

    key: tuple[str, int, int]
    track_id: int
    label: int
    cx: float
    cy: float
    width: float
    height: float
    scale: float
    max_scale: float
    angle: float
    depth: float
    order: int
    appearance: Appearance


def _fold(q: float, lo: float, hi: float) -> float:
    """Reflect ``q`` (>= lo) into ``[lo, hi]``: a point bouncing between two walls."""
    span = hi - lo
    s = (q - lo) % (2.0 * span)
    return lo + (s if s <= span else 2.0 * span - s)


@dataclasses.dataclass(frozen=True)
class _Wobble:
    """``start + speed tau + amp (sin(omega tau + phase) - sin(phase))``."""

    start: float
    speed: float
    amp: float
    omega: float
    phase: float

    def at(self, tau: float) -> float:
        wobble = math.sin(self.omega * tau + self.phase) - math.sin(self.phase)
        return self.start + self.speed * tau + self.amp * wobble


@dataclasses.dataclass(frozen=True)
class _Life:
    """One random object's whole life (see the module docstring)."""

    key: tuple[str, int, int]
    track_id: int
    start: float  # scene time of entry, s
    window: float  # seconds from start by which it has left
    size: tuple[float, float]  # (w, h), fractions of min(height, width)
    depth: float
    appearance: Appearance
    primary: int  # entry axis: 0 = x, 1 = y
    reverse: bool  # enters from the right/bottom
    radius: float  # out-of-frame distance on the entry axis (fraction of that axis)
    walls: tuple[float, float]  # entry axis
    crossings: int
    q: _Wobble
    side_walls: tuple[float, float]
    side: _Wobble
    scale: _Wobble  # start 1, speed 0
    scale_amp: float
    angle0: float
    spin: float  # rad/s

    def entry_coordinate(self, tau: float) -> float | None:
        """Position on the entry axis (fraction), or ``None`` when out of the frame."""
        q = self.q.at(tau)
        lo, hi = self.walls
        margin = self.radius + lo  # r (1 - m): the entry and exit stretch
        q_exit = lo + self.crossings * (hi - lo)
        if q <= -self.radius or q >= q_exit + margin:
            return None
        if q < lo:
            x = q
        elif q <= q_exit:
            x = _fold(q, lo, hi)
        elif self.crossings % 2 == 1:
            x = hi + (q - q_exit)
        else:
            x = lo - (q - q_exit)
        return 1.0 - x if self.reverse else x

    def place(self, t: float, width: int, height: int, order: int) -> Placement | None:
        tau = t - self.start
        if tau <= 0.0 or tau >= self.window:
            return None
        along = self.entry_coordinate(tau)
        if along is None:
            return None
        across = _fold(self.side.at(tau), *self.side_walls)
        x, y = (along, across) if self.primary == 0 else (across, along)
        unit = min(width, height)
        return Placement(
            key=self.key,
            track_id=self.track_id,
            label=self.appearance.label,
            cx=x * width,
            cy=y * height,
            width=self.size[0] * unit,
            height=self.size[1] * unit,
            scale=self.scale.at(tau),
            max_scale=1.0 + self.scale_amp,
            angle=self.angle0 + self.spin * tau,
            depth=self.depth,
            order=order,
            appearance=self.appearance,
        )


def _make_life(
    rng: np.random.Generator,
    *,
    key: tuple[str, int, int],
    track_id: int,
    start: float,
    window: float,
    width: int,
    height: int,
    shapes: int,
) -> _Life:
    label = int(rng.integers(1, shapes + 1))
    d = math.exp(rng.uniform(math.log(0.08), math.log(0.28)))
    aspect = rng.uniform(0.85, 1.15) if label == STAR else rng.uniform(0.7, 1.4)
    w, h = d * math.sqrt(aspect), d / math.sqrt(aspect)
    scale_amp = float(rng.uniform(0.0, 0.15))
    reach = (1.0 + scale_amp) * math.hypot(w, h) / 2.0  # covers any rotation
    unit = min(width, height)
    primary = int(rng.integers(0, 2))
    axis_len = (width, height)
    r_p = reach * unit / axis_len[primary]
    r_s = reach * unit / axis_len[1 - primary]
    m = rng.uniform(-1.0, 0.7)  # walls: m r beyond the edges (negative: inside)
    lo, hi = -m * r_p, 1.0 + m * r_p
    crossings = int(rng.integers(1, 4))
    q_end = lo + crossings * (hi - lo) + r_p * (1.0 - m)
    omega = rng.uniform(0.3, 1.2)
    a = rng.uniform(0.0, min(0.7, 0.25 * omega * window))
    speed = 1.01 * (q_end + r_p) / (window - 2.0 * a / omega)
    m_s = rng.uniform(-1.0, 0.7)
    side_walls = (-m_s * r_s, 1.0 + m_s * r_s)
    side_speed = rng.uniform(0.01, 0.12) * (1 if rng.random() < 0.5 else -1)
    upright = rng.random() < 0.4
    return _Life(
        key=key,
        track_id=track_id,
        start=start,
        window=window,
        size=(w, h),
        depth=float(rng.uniform(0, 1)),
        appearance=make_appearance(rng, label),
        primary=primary,
        reverse=bool(rng.random() < 0.5),
        radius=r_p,
        walls=(lo, hi),
        crossings=crossings,
        q=_Wobble(-r_p, speed, a * speed / omega, omega, rng.uniform(0, 2 * math.pi)),
        side_walls=side_walls,
        side=_Wobble(
            float(rng.uniform(*side_walls)),
            side_speed,
            float(rng.uniform(0.0, 0.06)),
            float(rng.uniform(0.2, 1.0)),
            float(rng.uniform(0, 2 * math.pi)),
        ),
        scale=_Wobble(1.0, 0.0, scale_amp, rng.uniform(0.2, 0.8), rng.uniform(0, 2 * math.pi)),
        scale_amp=scale_amp,
        angle0=0.0 if upright else float(rng.uniform(0, 2 * math.pi)),
        spin=0.0 if upright else float(rng.uniform(-0.3, 0.3)),
    )


class RandomObjects:
    """Up to ``count`` random objects at a time, with closed-form motion.

    Track ids: the life in epoch ``j`` of slot ``k`` is ``j * count + k + 1``,
    so the objects present at the start are ``1..count`` and later ones get
    larger ids; an id is never reused.
    """

    def __init__(self, *, seed: int, count: int, width: int, height: int, shapes: int = 4) -> None:
        self.seed, self.count, self.width, self.height = seed, count, width, height
        self.shapes = shapes  # labels are drawn from 1..shapes
        self._periods: list[float] = []
        self._offsets: list[float] = []
        for k in range(count):
            rng = np.random.default_rng([seed, k])
            period = float(rng.uniform(15.0, 40.0))
            self._periods.append(period)
            self._offsets.append(float(rng.uniform(0.0, period)))
        self._lives: collections.OrderedDict[tuple[int, int], _Life] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _life(self, slot: int, epoch: int) -> _Life:
        with self._lock:
            life = self._lives.get((slot, epoch))
            if life is not None:
                self._lives.move_to_end((slot, epoch))
                return life
        period, offset = self._periods[slot], self._offsets[slot]
        rng = np.random.default_rng([self.seed, slot, epoch, 7919])
        gap = float(rng.uniform(0.0, 0.2)) * period
        life = _make_life(
            rng,
            key=("life", slot, epoch),
            track_id=epoch * self.count + slot + 1,
            start=epoch * period - offset + gap,
            window=period - gap - 0.25,
            width=self.width,
            height=self.height,
            shapes=self.shapes,
        )
        with self._lock:
            self._lives[(slot, epoch)] = life
            while len(self._lives) > 4 * self.count + 8:
                self._lives.popitem(last=False)
        return life

    def placements(self, t: float) -> list[Placement]:
        """Objects present at scene time ``t`` (seconds), in slot order."""
        out = []
        for k in range(self.count):
            epoch = math.floor((t + self._offsets[k]) / self._periods[k])
            p = self._life(k, epoch).place(t, self.width, self.height, order=k)
            if p is not None:
                out.append(p)
        return out


class ScriptedObjects:
    """The objects of a list of :class:`ObjectSpec`."""

    def __init__(self, specs: Sequence[ObjectSpec], *, seed: int) -> None:
        self.specs = tuple(specs)
        ids = [s.track_id if s.track_id is not None else i + 1 for i, s in enumerate(self.specs)]
        if len(set(ids)) != len(ids):
            raise ValueError(f"scripted objects need unique track ids, got {ids}")
        self.track_ids = ids
        self._paths = [np.asarray(s.path, dtype=np.float64).reshape(-1, 3) for s in self.specs]
        self._looks = [
            make_appearance(
                np.random.default_rng([seed, 1_000_003, i]), label_id(s.label), s.colour
            )
            for i, s in enumerate(self.specs)
        ]

    def placements(self, t: float) -> list[Placement]:
        """Objects present at scene time ``t`` (seconds), in list order."""
        out = []
        for i, spec in enumerate(self.specs):
            if spec.appear is not None and t < spec.appear:
                continue
            if spec.disappear is not None and t >= spec.disappear:
                continue
            path = self._paths[i]
            if len(path) > 1 and not path[0, 0] <= t <= path[-1, 0]:
                continue
            cx = float(np.interp(t, path[:, 0], path[:, 1]))
            cy = float(np.interp(t, path[:, 0], path[:, 2]))
            out.append(
                Placement(
                    key=("spec", i, 0),
                    track_id=self.track_ids[i],
                    label=self._looks[i].label,
                    cx=cx,
                    cy=cy,
                    width=float(spec.size[0]),
                    height=float(spec.size[1]),
                    scale=1.0,
                    max_scale=1.0,
                    angle=math.radians(spec.angle),
                    depth=float(spec.depth),
                    order=i,
                    appearance=self._looks[i],
                )
            )
        return out
