"""Decoders on top of the packet reader: ``pyav`` (CPU) and ``dali`` (NVDEC).

A decoder turns a session's ``av.Packet``s into ``Picture``s: a
presentation time and a lazily converted image, so that frames skipped by
``max_fps`` never pay for the RGB conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Protocol

import torch
from torch import Tensor

from streamseg.ingest.spec import DECODERS, SourceError
from streamseg.registry import load

__all__ = [
    "DECODERS",
    "DecodeError",
    "Decoder",
    "Picture",
    "PyAVDecoder",
    "build_pyav",
    "make_decoder",
]


class DecodeError(Exception):
    """Data the decoder could not decode; the source counts it and goes on."""


class Picture(Protocol):
    """One decoded frame: ``pts`` in seconds (or ``None``) and its pixels."""

    pts: float | None

    def image(self) -> Tensor:
        """``uint8 (H, W, 3)`` RGB, on the decoder's device."""
        ...


class Decoder(Protocol):
    """Turns packets of one stream into pictures, in presentation order."""

    def decode(self, packet: Any) -> Sequence[Picture]:
        """Pictures completed by ``packet`` (may be none).

        Raises ``DecodeError`` (or PyAV's ``FFmpegError``) on corrupt data.
        """
        ...

    def flush(self) -> Sequence[Picture]:
        """Pictures still held inside the decoder (at the end of a stream)."""
        ...

    def close(self) -> None: ...


class _AVPicture:
    __slots__ = ("_frame", "pts")

    def __init__(self, frame: Any, time_base: Fraction) -> None:
        self._frame = frame
        tb = frame.time_base or time_base
        self.pts = None if frame.pts is None else float(frame.pts * tb)

    def image(self) -> Tensor:
        import numpy as np

        array = np.ascontiguousarray(self._frame.to_ndarray(format="rgb24"))
        return torch.from_numpy(array)


class PyAVDecoder:
    """FFmpeg's software decoder (PyAV), on the CPU.

    Keyword arguments:
        stream: the session's ``av.VideoStream`` (its codec context decodes).
        threads: decoder threads (0: FFmpeg decides).
    """

    def __init__(self, *, stream: Any, threads: int = 0) -> None:
        self._ctx = stream.codec_context
        self._ctx.thread_count = threads
        self._time_base = Fraction(stream.time_base or Fraction(1, 90000))

    def decode(self, packet: Any) -> list[_AVPicture]:
        return [_AVPicture(f, self._time_base) for f in self._ctx.decode(packet)]

    def flush(self) -> list[_AVPicture]:
        import av

        try:
            return [_AVPicture(f, self._time_base) for f in self._ctx.decode(None)]
        except (av.error.EOFError, av.error.FFmpegError):
            return []

    def close(self) -> None:
        """The codec context belongs to the stream; it is freed with the container."""


def build_pyav(*, stream: Any, device: str = "cpu") -> Decoder:
    """The ``pyav`` row of :data:`DECODERS`: decodes on the CPU, whatever ``device`` says."""
    return PyAVDecoder(stream=stream)


def make_decoder(kind: str, *, stream: Any, device: str = "cpu") -> Decoder:
    """A decoder of ``kind`` (a :data:`DECODERS` key: ``pyav``, ``dali``) for ``stream``.

    ``device`` is where a decoder that leaves frames on a device (``dali``)
    puts them (``cpu`` or ``cuda[:N]``); ``pyav`` always decodes to the CPU.
    """
    if kind not in DECODERS:
        raise SourceError(f"unknown decode backend {kind!r}; use one of {', '.join(DECODERS)}")
    decoder: Decoder = load(DECODERS[kind].builder)(stream=stream, device=device)
    return decoder
