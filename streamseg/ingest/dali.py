"""The ``dali`` decoder: PyAV demuxes, NVIDIA DALI decodes (NVDEC on a GPU).

DALI's video decoder (``fn.decoders.video``) takes a video *file* from
memory, not single packets. So the decoder collects one group of pictures
(a key frame and the packets up to the next key frame), remuxes it without
re-encoding into an in-memory Matroska file and decodes that in one DALI
run: all frames of the group come out together. This adds up to one GOP
of latency for live cameras (configure cameras with short GOPs, e.g. 1 s)
and needs closed GOPs (the norm for cameras).

Backends: ``device="cpu"`` uses DALI's CPU decoder, which accepts VP8, VP9
and MJPEG only (that is what CI tests); ``device="cuda[:N]"`` uses the
``mixed`` backend (NVDEC: H.264, HEVC, AV1, VP9, ...) and leaves frames on
that GPU. DALI is an optional extra: ``pip install 'streamseg[dali]'``.
"""

from __future__ import annotations

import importlib.util
import io
import logging
from fractions import Fraction
from typing import Any

import torch
from torch import Tensor

from streamseg.ingest.decoders import DecodeError
from streamseg.ingest.packets import is_keyframe
from streamseg.ingest.spec import SourceError

__all__ = ["CPU_CODECS", "DaliDecoder", "dali_available", "dali_problem"]

log = logging.getLogger("streamseg.ingest")

CPU_CODECS = ("vp8", "vp9", "mjpeg")
INSTALL_HINT = (
    "decode: dali needs NVIDIA DALI, an optional extra: "
    "pip install 'streamseg[dali]' (package nvidia-dali-cuda120), or use decode: pyav"
)


def dali_available() -> bool:
    """Whether ``nvidia.dali`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        return False


def dali_problem() -> tuple[str, str] | None:
    """The ``dali`` row's check (``streamseg.ingest.spec.DECODERS``): ``(problem, fix)``
    when DALI is not installed, else ``None``."""
    return None if dali_available() else ("NVIDIA DALI is not installed", INSTALL_HINT)


class _DaliPicture:
    __slots__ = ("_frames", "_i", "pts")

    def __init__(self, frames: Tensor, i: int, pts: float | None) -> None:
        self._frames, self._i, self.pts = frames, i, pts

    def image(self) -> Tensor:
        return self._frames[self._i]


class DaliDecoder:
    """Decodes one stream's packets GOP by GOP with DALI.

    Keyword arguments:
        stream: the session's ``av.VideoStream`` (a template for remuxing).
        device: ``cpu`` (DALI CPU decoder: VP8/VP9/MJPEG) or ``cuda[:N]`` (NVDEC).
    """

    def __init__(self, *, stream: Any, device: str = "cpu") -> None:
        if not dali_available():
            raise SourceError(INSTALL_HINT)
        self._template = stream
        self._time_base = Fraction(stream.time_base or Fraction(1, 90000))
        self._device = torch.device(device)
        self._codec = codec = stream.codec_context.name
        if self._device.type == "cpu" and codec not in CPU_CODECS:
            raise SourceError(
                f"decode: dali on the CPU decodes only {', '.join(CPU_CODECS)}, and this "
                f"stream is {codec}; use decode: pyav, or a CUDA device for NVDEC"
            )
        if self._device.type not in ("cpu", "cuda"):
            raise SourceError(f"decode: dali cannot decode to device {device!r} (cpu or cuda)")
        self._pipe = self._build_pipeline()
        self._gop: list[Any] = []

    def _build_pipeline(self) -> Any:
        from nvidia.dali import fn, pipeline_def, types

        on_gpu = self._device.type == "cuda"

        @pipeline_def(
            batch_size=1,
            num_threads=1,
            device_id=(self._device.index or 0) if on_gpu else None,  # type: ignore[arg-type]
            prefetch_queue_depth=1,
            exec_async=False,
            exec_pipelined=False,
        )
        def gop_pipeline() -> Any:
            encoded = fn.external_source(name="encoded", dtype=types.UINT8, ndim=1)  # type: ignore[attr-defined]
            return fn.decoders.video(encoded, device="mixed" if on_gpu else "cpu")

        pipe = gop_pipeline()
        pipe.build()
        return pipe

    def decode(self, packet: Any) -> list[_DaliPicture]:
        key = is_keyframe(packet, self._codec)
        if not key and not self._gop:  # packets before the first key frame are unusable
            return []
        if not key:
            self._gop.append(_copy_packet(packet, key))
            return []
        done, self._gop = self._gop, [_copy_packet(packet, key)]
        return self._decode_gop(done) if done else []

    def flush(self) -> list[_DaliPicture]:
        done, self._gop = self._gop, []
        return self._decode_gop(done) if done else []

    def close(self) -> None:
        self._gop.clear()
        self._pipe = None

    def _decode_gop(self, gop: list[Any]) -> list[_DaliPicture]:
        import numpy as np

        chunk = np.frombuffer(remux_matroska(self._template, gop), dtype=np.uint8)
        try:
            self._pipe.feed_input("encoded", [chunk])
            (decoded,) = self._pipe.run()
        except Exception as exc:  # DALI's pipeline is unusable after an error
            self._pipe = self._build_pipeline()
            raise DecodeError(f"dali could not decode a GOP of {len(gop)} packets: {exc}") from exc
        frames = self._to_torch(decoded)
        times = sorted(float(p.pts * self._time_base) for p in gop if p.pts is not None)
        if len(times) != frames.shape[0]:
            log.debug("dali: %d packets gave %d frames", len(gop), frames.shape[0])
            times = []
        return [
            _DaliPicture(frames, i, times[i] if i < len(times) else None)
            for i in range(frames.shape[0])
        ]

    def _to_torch(self, decoded: Any) -> Tensor:
        """``uint8 (F, H, W, 3)`` on ``self._device`` from DALI's one-sample batch."""
        if self._device.type == "cpu":
            # copied: DALI reuses its output buffers on the next run
            return torch.from_numpy(decoded.as_array()[0].copy())
        from nvidia.dali.plugin.pytorch import feed_ndarray

        tensor = decoded.as_tensor()
        out = torch.empty(tuple(tensor.shape())[1:], dtype=torch.uint8, device=self._device)
        feed_ndarray(tensor, out, cuda_stream=torch.cuda.current_stream(self._device))
        return out


def _copy_packet(packet: Any, key: bool) -> Any:
    """A standalone copy (the original may be shared, e.g. with the clip recorder)."""
    import av

    copy = av.Packet(bytes(packet))
    copy.pts, copy.dts, copy.time_base = packet.pts, packet.dts, packet.time_base
    copy.is_keyframe = key
    return copy


def remux_matroska(template: Any, packets: list[Any]) -> bytes:
    """``packets`` of ``template``'s stream as an in-memory Matroska file (no re-encoding).

    ``template``'s container must still be open (PyAV reads its codec
    parameters); the packets' ``stream`` is reassigned.
    """
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="matroska") as out:
        stream = out.add_stream_from_template(template)
        for packet in packets:
            packet.stream = stream
            out.mux(packet)
    return buf.getvalue()
