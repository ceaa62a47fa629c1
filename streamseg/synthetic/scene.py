"""Seeded synthetic scenes: moving, occluding textured shapes with exact ground truth.

A :class:`SyntheticScene` is a video of any size and frame rate in which
discs, squares, triangles and stars (textured, coloured per object, of
varied sizes, slowly scaling and turning) move over a textured background,
overlap, hide one another, and enter and leave through the frame edges.
Every frame comes with its exact ground truth: the visible mask, box, class
and identity of each object. With ``stuff=True`` the background is regions
of ground, road and water (``stuff.py``), and the ground truth also says
which of them every other pixel shows (a panoptic ground truth).

The scene is a pure function of ``seed`` and time: ``scene.frame(i)`` gives
the same pixels whether frames are made in order or not, on any machine.

Example:
    >>> scene = SyntheticScene(seed=1, height=96, width=128, num_frames=10)
    >>> f = scene.frame(3)
    >>> tuple(f.image.shape), f.time
    ((96, 128, 3), 0.2)
    >>> bool((f.gt.masks.sum(0) <= 1).all())  # visible masks never overlap
    True
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from streamseg.synthetic.motion import (
    ObjectSpec,
    Placement,
    RandomObjects,
    ScriptedObjects,
)
from streamseg.synthetic.options import (
    URL_PARAMETERS,
    check_options,
    check_shapes,
    parse_synthetic_url,
)
from streamseg.synthetic.render import composite
from streamseg.synthetic.sprites import (
    Sprite,
    label_id,
    make_background,
    make_noise_field,
    make_sprite,
)
from streamseg.synthetic.stuff import STUFF_CLASS_NAMES, make_stuff
from streamseg.types import Frame, Instances, Regions

__all__ = [
    "SHAPE_CLASS_NAMES",
    "SYNTHETIC_CLASS_NAMES",
    "URL_PARAMETERS",
    "ObjectSpec",
    "SceneFrame",
    "SyntheticScene",
    "parse_synthetic_url",
]

SYNTHETIC_CLASS_NAMES = ("__background__", "disc", "square", "triangle", "star")
# The shapes a scene may draw, in label order; a scene draws the first
# ``shapes`` of them (default 4: SYNTHETIC_CLASS_NAMES). The fifth, hexagon,
# is opt-in (``shapes=5``): a class a model has not learnt, to teach it one.
SHAPE_CLASS_NAMES = ("disc", "square", "triangle", "star", "hexagon")
DEFAULT_SHAPES = 4

_NOISE_PAD = 32  # the noise field is this much larger than the frame; offsets vary per frame


@dataclasses.dataclass(frozen=True)
class SceneFrame:
    """One frame of a synthetic scene with its ground truth.

    Attributes:
        index: frame number, from 0.
        time: scene time in seconds (``index / fps``).
        image: ``uint8 (H, W, 3)`` RGB tensor (CPU).
        gt: the visible objects, sorted by track id: ``boxes`` float32 xyxy
            pixels, tight around the visible mask (x2/y2 = last pixel + 1);
            ``labels`` int64 (1..4, see ``SYNTHETIC_CLASS_NAMES``; 5, hexagon,
            with ``shapes=5``);
            ``scores`` all 1.0; ``masks`` bool ``(N, H, W)`` visible pixels
            (disjoint); ``track_ids`` int64 persistent identities (>= 1);
            with stuff, ``regions``: the stuff class of every pixel no
            object covers (the last 3 labels of ``class_names``; 0 under objects,
            also under objects too small to be in the ground truth).
        visibility: float32 ``(N,)``: visible fraction of each object's
            shape (occluders and the frame border both hide), in ``(0, 1]``.
    """

    index: int
    time: float
    image: Tensor
    gt: Instances
    visibility: Tensor

    def to_frame(self, camera_id: str, *, capture_time: float | None = None) -> Frame:
        """This frame as a pipeline :class:`~streamseg.types.Frame` (pts = scene time)."""
        return Frame(
            camera_id=camera_id,
            seq=self.index,
            pts=self.time,
            capture_time=self.time if capture_time is None else capture_time,
            image=self.image,
        )


class SyntheticScene:
    """A seeded synthetic video with exact per-frame instance ground truth.

    Args:
        seed: picks the background and every object; same seed, same video.
        height / width: frame size in pixels (16..8192).
        fps: frames per second; frame ``i`` shows scene time ``i / fps``.
            Motion is defined in seconds and fractions of the frame, so the
            scene looks the same at any fps and resolution (same aspect).
        num_objects: random objects present at a time (at most; each comes
            and goes, and is replaced by a new identity a little later).
        objects: scripted objects; when given, only these are drawn and
            ``num_objects`` is ignored.
        num_frames: length of the video, or ``None`` for endless.
        noise: sensor noise, at most this many levels per channel (0..8,
            0 = none); different in every frame, deterministic.
        shake: camera shake, the background jitters by up to this fraction
            of ``min(height, width)`` (0 = a still background, at most 0.1).
        min_visible_pixels: objects showing fewer pixels are left out of
            the ground truth (they are still drawn).
        stuff: draw the objects over ground, road and water regions (see
            ``stuff.py``) and give their label map in ``gt.regions``.
        shapes: how many of :data:`SHAPE_CLASS_NAMES` random objects are
            drawn from: 4 (disc, square, triangle, star; the default, as
            every scene before the option) or 5, which adds hexagons (a
            new class to teach a trained model). Scripted hexagons need 5.

    ``frame(i)`` is thread-safe. Iterating yields ``frame(0)``,
    ``frame(1)``, ... (``num_frames`` of them, or forever).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        height: int = 360,
        width: int = 640,
        fps: float = 15.0,
        num_objects: int = 6,
        objects: Sequence[ObjectSpec] | None = None,
        num_frames: int | None = None,
        noise: int = 2,
        shake: float = 0.0,
        min_visible_pixels: int = 20,
        stuff: bool = False,
        shapes: int = DEFAULT_SHAPES,
    ) -> None:
        check_options(height, width, fps, num_objects, num_frames, noise, shake)
        check_shapes(shapes)
        self.shapes = int(shapes)
        if min_visible_pixels < 1:
            raise ValueError(f"min_visible_pixels must be >= 1, got {min_visible_pixels}")
        self.seed, self.height, self.width, self.fps = (
            int(seed),
            int(height),
            int(width),
            float(fps),
        )
        self.num_frames = None if num_frames is None else int(num_frames)
        self.noise, self.shake = int(noise), float(shake)
        self.min_visible_pixels = int(min_visible_pixels)
        self._source: RandomObjects | ScriptedObjects
        if objects is not None:
            self.num_objects = len(objects)
            self._source = ScriptedObjects(objects, seed=self.seed)
            beyond = [s.label for s in objects if label_id(s.label) > self.shapes]
            if beyond:
                raise ValueError(f"scripted objects {beyond} need shapes=5 (hexagons)")
        else:
            self.num_objects = int(num_objects)
            self._source = RandomObjects(
                seed=self.seed,
                count=self.num_objects,
                width=self.width,
                height=self.height,
                shapes=self.shapes,
            )
        unit = min(self.height, self.width)
        self._pad = math.ceil(self.shake * unit)
        rng = np.random.default_rng([self.seed, 0xBAC])
        self.stuff = bool(stuff)
        self._stuff_labels: np.ndarray | None = None
        if self.stuff:
            self._background, labels = make_stuff(rng, self.height, self.width, self._pad)
            self._stuff_labels = (labels + 1 + self.shapes).astype(np.int16)
        else:
            self._background = make_background(rng, self.height, self.width, self._pad)
        self._shake_phases = rng.uniform(0, 2 * math.pi, size=4)
        self._noise_field = (
            make_noise_field(rng, self.height + _NOISE_PAD, self.width + _NOISE_PAD, self.noise)
            if self.noise
            else None
        )
        self._sprites: collections.OrderedDict[tuple[str, int, int], Sprite] = (
            collections.OrderedDict()
        )
        self._sprite_capacity = 4 * max(self.num_objects, 1) + 8
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ API

    @property
    def class_names(self) -> tuple[str, ...]:
        """``("__background__", "disc", "square", "triangle", "star")`` (and
        ``"hexagon"`` with ``shapes=5``), then with stuff ``"ground", "road",
        "water"``; labels index it."""
        things = ("__background__", *SHAPE_CLASS_NAMES[: self.shapes])
        return things + (STUFF_CLASS_NAMES if self.stuff else ())

    @property
    def stuff_class_names(self) -> tuple[str, ...]:
        """The stuff classes (regions) of ``class_names``: empty without stuff."""
        return STUFF_CLASS_NAMES if self.stuff else ()

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` in pixels."""
        return (self.height, self.width)

    def time(self, index: int) -> float:
        """Scene time of frame ``index`` in seconds."""
        return index / self.fps

    def frame(self, index: int, *, hide: Collection[int] = ()) -> SceneFrame:
        """Render frame ``index`` (random access; same result in any order).

        Args:
            index: frame number, ``0 <= index < num_frames``.
            hide: track ids not to draw (the objects behind them show
                instead); for checking ground truth against pixels.

        Raises:
            IndexError: ``index`` is negative or past ``num_frames``.
        """
        index = int(index)
        if index < 0 or (self.num_frames is not None and index >= self.num_frames):
            raise IndexError(f"frame {index} is outside the scene (0..{self._last_index()})")
        t = self.time(index)
        placements = [p for p in self._source.placements(t) if p.track_id not in hide]
        image, offset = self._background_at(t)
        rendered = composite(image, placements, self._sprite, min_pixels=self.min_visible_pixels)
        self._add_noise(image, index)
        n = rendered.boxes.shape[0]
        gt = Instances(
            image_size=(self.height, self.width),
            boxes=torch.from_numpy(rendered.boxes),
            scores=torch.ones((n,), dtype=torch.float32),
            labels=torch.from_numpy(rendered.labels),
            masks=torch.from_numpy(rendered.masks),
            track_ids=torch.from_numpy(rendered.track_ids),
            regions=self._regions(offset, rendered.covered),
        )
        return SceneFrame(
            index=index,
            time=t,
            image=torch.from_numpy(image),
            gt=gt,
            visibility=torch.from_numpy(rendered.visibility),
        )

    def placements(self, index: int) -> list[Placement]:
        """Every object present at frame ``index`` (also hidden or off-screen ones)."""
        return self._source.placements(self.time(index))

    def __iter__(self) -> Iterator[SceneFrame]:
        index = 0
        while self.num_frames is None or index < self.num_frames:
            yield self.frame(index)
            index += 1

    def __len__(self) -> int:
        if self.num_frames is None:
            raise TypeError("an endless SyntheticScene (num_frames=None) has no length")
        return self.num_frames

    def __repr__(self) -> str:
        return (
            f"SyntheticScene(seed={self.seed}, height={self.height}, width={self.width}, "
            f"fps={self.fps:g}, num_objects={self.num_objects}, num_frames={self.num_frames}"
            + (f", shapes={self.shapes})" if self.shapes != DEFAULT_SHAPES else ")")
        )

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> SyntheticScene:
        """A scene from ``synthetic://?seed=1&width=640&height=360&fps=15&objects=6&frames=300``.

        Every parameter is optional (see :data:`URL_PARAMETERS`);
        ``overrides`` are keyword arguments of the constructor that win
        over the URL (e.g. ``objects=[ObjectSpec(...)]``).

        Raises:
            ValueError: not a ``synthetic://`` URL, an unknown parameter (the
                message lists the valid ones) or a bad value.
        """
        options = parse_synthetic_url(url)
        options.update(overrides)
        return cls(**options)

    # ------------------------------------------------------------ internals

    def _last_index(self) -> str:
        return "endless" if self.num_frames is None else str(self.num_frames - 1)

    def _sprite(self, p: Placement) -> Sprite:
        with self._lock:
            sprite = self._sprites.get(p.key)
            if sprite is not None:
                self._sprites.move_to_end(p.key)
                return sprite
        cells_x = max(1, math.ceil(p.width * p.max_scale - 1e-9))
        cells_y = max(1, math.ceil(p.height * p.max_scale - 1e-9))
        sprite = make_sprite(p.appearance, cells_x, cells_y)
        with self._lock:
            self._sprites[p.key] = sprite
            while len(self._sprites) > self._sprite_capacity:
                self._sprites.popitem(last=False)
        return sprite

    def _regions(self, offset: tuple[int, int], covered: np.ndarray) -> Regions | None:
        """The stuff label map under the crop at ``offset``, 0 where objects cover it."""
        if self._stuff_labels is None:
            return None
        oy, ox = offset
        crop = self._stuff_labels[oy : oy + self.height, ox : ox + self.width]
        return Regions.from_label_map(torch.from_numpy(np.where(covered, 0, crop)))

    def _background_at(self, t: float) -> tuple[np.ndarray, tuple[int, int]]:
        """A fresh copy of the background as seen at time ``t`` (shaken when asked),
        and the crop's ``(y, x)`` offset into the padded background."""
        oy = ox = self._pad
        if self._pad:
            ph = self._shake_phases
            gy = 0.6 * math.sin(2.3 * t + ph[0]) + 0.4 * math.sin(8.1 * t + ph[1])
            gx = 0.6 * math.sin(1.9 * t + ph[2]) + 0.4 * math.sin(7.3 * t + ph[3])
            oy += round(self._pad * gy)
            ox += round(self._pad * gx)
        return self._background[oy : oy + self.height, ox : ox + self.width].copy(), (oy, ox)

    def _add_noise(self, image: np.ndarray, index: int) -> None:
        if self._noise_field is None:
            return
        h = _mix(self.seed, index)
        oy, ox = h % (_NOISE_PAD + 1), (h >> 16) % (_NOISE_PAD + 1)
        np.add(image, self._noise_field[oy : oy + self.height, ox : ox + self.width], out=image)
        np.subtract(image, np.uint8(self.noise), out=image)


def _mix(seed: int, index: int) -> int:
    """A 64-bit hash of (seed, index) (splitmix64 finaliser)."""
    z = (seed * 0x9E3779B97F4A7C15 + index * 0xBF58476D1CE4E5B9 + 0x94D049BB133111EB) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)
