"""A synthetic scene's options: their limits, and the ``synthetic://`` URL that sets them."""

from __future__ import annotations

import math
import urllib.parse
from typing import Any

from streamseg.synthetic.sprites import LEVEL_MARGIN

__all__ = ["URL_PARAMETERS", "check_options", "check_shapes", "parse_synthetic_url"]


def check_options(
    height: int,
    width: int,
    fps: float,
    num_objects: int,
    num_frames: int | None,
    noise: int,
    shake: float,
) -> None:
    if not (16 <= height <= 8192 and 16 <= width <= 8192):
        raise ValueError(f"height and width must be 16..8192 pixels, got {height}x{width}")
    if not (math.isfinite(fps) and 0 < fps <= 1000):
        raise ValueError(f"fps must be > 0 and <= 1000, got {fps}")
    if num_objects < 0 or num_objects > 1000:
        raise ValueError(f"objects (num_objects) must be 0..1000, got {num_objects}")
    if num_frames is not None and num_frames < 1:
        raise ValueError(
            f"frames (num_frames) must be >= 1 (or None for endless), got {num_frames}"
        )
    if not 0 <= noise <= LEVEL_MARGIN:
        raise ValueError(f"noise must be 0..{LEVEL_MARGIN} levels, got {noise}")
    if not (math.isfinite(shake) and 0.0 <= shake <= 0.1):
        raise ValueError(f"shake must be 0..0.1 (fraction of the frame), got {shake}")


def check_shapes(shapes: int) -> None:
    """``shapes``: 4 (the scene's own classes) or 5 (adds the opt-in hexagon)."""
    if shapes not in (4, 5):
        raise ValueError(f"shapes must be 4 (disc..star) or 5 (adds hexagon), got {shapes}")


# The scene's defaults of the options a URL may leave out (SyntheticScene's).
_DEFAULTS: dict[str, Any] = {
    "height": 360,
    "width": 640,
    "fps": 15.0,
    "num_objects": 6,
    "num_frames": None,
    "noise": 2,
    "shake": 0.0,
}

# URL parameter -> (constructor keyword, type, what it means)
URL_PARAMETERS: dict[str, tuple[str, type, str]] = {
    "seed": ("seed", int, "random seed (integer)"),
    "width": ("width", int, "frame width, pixels"),
    "height": ("height", int, "frame height, pixels"),
    "fps": ("fps", float, "frames per second"),
    "objects": ("num_objects", int, "random objects at a time"),
    "frames": ("num_frames", int, "number of frames (default: endless)"),
    "noise": ("noise", int, "sensor noise, levels 0..8"),
    "shake": ("shake", float, "camera shake, fraction of the frame 0..0.1"),
    "min_pixels": ("min_visible_pixels", int, "smallest visible object kept in the gt"),
    "stuff": ("stuff", int, "1: ground, road and water regions under the objects"),
    "shapes": ("shapes", int, "object classes: 4 (disc..star, default) or 5 (adds hexagon)"),
}


def parse_synthetic_url(url: str) -> dict[str, Any]:
    """``synthetic://?k=v&...`` -> :class:`SyntheticScene` keyword arguments.

    Raises:
        ValueError: not a ``synthetic://`` URL, an unknown or repeated
            parameter, or a value of the wrong type; the message names the
            parameter and lists the valid ones.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "synthetic":
        raise ValueError(f"{url!r} is not a synthetic:// URL (e.g. synthetic://?seed=1&fps=15)")
    valid = ", ".join(URL_PARAMETERS)
    options: dict[str, Any] = {}
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name not in URL_PARAMETERS:
            raise ValueError(f"{url}: unknown parameter {name!r}; valid parameters: {valid}")
        keyword, kind, meaning = URL_PARAMETERS[name]
        if keyword in options:
            raise ValueError(f"{url}: parameter {name!r} is given more than once")
        try:
            options[keyword] = kind(value)
        except ValueError:
            kind_text = "an integer" if kind is int else "a number"
            raise ValueError(
                f"{url}: parameter {name}={value!r} must be {kind_text} ({meaning})"
            ) from None
    probe = {k: options.get(k, v) for k, v in _DEFAULTS.items()}
    try:
        check_options(**probe)
    except ValueError as exc:
        raise ValueError(f"{url}: {exc}") from None
    if options.get("min_visible_pixels", 1) < 1:
        raise ValueError(f"{url}: min_pixels must be >= 1")
    try:
        check_shapes(options.get("shapes", 4))
    except ValueError as exc:
        raise ValueError(f"{url}: {exc}") from None
    return options
