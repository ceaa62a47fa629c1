"""Reading and writing still images with PyAV (FFmpeg's PNG/JPEG codecs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["read_image", "write_png"]


def read_image(path: str | Path) -> Tensor:
    """Decode a PNG/JPEG/BMP/WebP file into ``uint8 (H, W, 3)`` RGB.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not a readable image.
    """
    import av

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image {path} does not exist")
    try:
        with av.open(str(path)) as container:
            frame = next(container.decode(video=0))
            array = frame.to_ndarray(format="rgb24")
    except (av.FFmpegError, StopIteration) as exc:
        raise ValueError(f"image {path} could not be decoded ({exc})") from None
    return torch.from_numpy(np.ascontiguousarray(array))


def write_png(path: str | Path, image: Tensor | np.ndarray) -> None:
    """Write ``uint8 (H, W, 3)`` RGB as a PNG file (lossless)."""
    import av

    array = image.numpy() if isinstance(image, Tensor) else np.asarray(image)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"write_png needs uint8 (H, W, 3), got {array.shape} {array.dtype}")
    codec = av.CodecContext.create("png", "w")
    codec.width = int(array.shape[1])
    codec.height = int(array.shape[0])
    codec.pix_fmt = "rgb24"
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(array), format="rgb24")
    packets = list(codec.encode(frame)) + list(codec.encode(None))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(bytes(p) for p in packets))
