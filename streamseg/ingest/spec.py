"""Camera URLs: which kind of source a URL names, and its options.

URL forms (see ``docs/ingest.md``):

* ``rtsp://[user:password@]host[:port]/path`` (also ``rtsps://``): an RTSP
  camera, over TCP. Other network streams FFmpeg reads (``http(s)://``,
  ``rtmp://``, ``srt://``) are handled the same way.
* ``/path/to/clip.mp4``, ``clip.mp4`` or ``file:///path/to/clip.mp4``: a
  video file in any container FFmpeg reads. Query keys: ``pace=1`` (play at
  real time), ``loop=1`` (start again at the end).
* ``/dev/video0`` or ``v4l2:///dev/video0``: a V4L2 device. Query keys:
  ``size=640x480``, ``fps=30``, ``format=mjpeg`` (the device's pixel format).
* ``synthetic://?seed=1&width=640&...``: a generated scene (the scene's own
  keys, see ``SyntheticScene.from_url``; ``frames=N`` ends it after N
  frames), plus ``pace=0`` to generate as fast as possible (benchmarks).

:data:`SCHEMES` is the one table of URL schemes: the config's URL check, the
CLI and the recorder derive from it, and :func:`parse_source_url` dispatches
on it. Each scheme names its kind and the ``"module:function"`` that parses
its URLs (imported on first use). Adding a source kind: one file with its
parser (and its opener), plus one line per scheme here.

Parsing does no I/O; ``check_exists`` looks for files and devices.
"""

from __future__ import annotations

import dataclasses
import os
import re
import urllib.parse
from pathlib import Path

from streamseg.errors import StartupError
from streamseg.redact import redact_url
from streamseg.registry import Table, load

__all__ = [
    "DECODERS",
    "SCHEMES",
    "DecoderKind",
    "Scheme",
    "SourceError",
    "SourceSpec",
    "decoder_problem",
    "parse_source_url",
    "register_decoder",
    "url_scheme",
]
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SourceError(StartupError):
    """A camera that cannot be opened as configured: the message says why and how to fix it.

    It never holds a password (URLs in it are redacted).
    """

    default_field = "cameras"


@dataclasses.dataclass(frozen=True)
class SourceSpec:
    """A parsed camera URL.

    Attributes:
        kind: ``rtsp``, ``network`` (other FFmpeg network protocols), ``file``,
            ``v4l2`` or ``synthetic``.
        target: what FFmpeg opens (a URL or a path); for ``synthetic`` the
            URL handed to ``SyntheticScene.from_url`` (our keys removed).
        display: the URL with secrets redacted, for logs and errors.
        input_format: FFmpeg input format name (``v4l2``), or ``None`` to probe.
        options: FFmpeg options from the URL's query (V4L2 size/fps/format).
        pace: play at real time (files; synthetic defaults to ``True``).
        loop: start again at the end (files).
    """

    kind: str
    target: str
    display: str
    input_format: str | None = None
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    pace: bool = False
    loop: bool = False

    @property
    def is_network(self) -> bool:
        return self.kind in ("rtsp", "network")

    @property
    def live(self) -> bool:
        """Whether its stream is live by default: what its kind's row of :data:`SCHEMES`
        says (:attr:`Scheme.live`; files are not). The one place this is decided:
        ``open_source``, ``open_packet_reader`` and the sources ask it."""
        return any(scheme.live for scheme in SCHEMES.values() if scheme.kind == self.kind)

    def check_exists(self, camera_id: str) -> None:
        """Raise ``SourceError`` when a file or device is missing."""
        if self.kind == "file" and not Path(self.target).is_file():
            what = "is a directory" if Path(self.target).is_dir() else "does not exist"
            raise SourceError(
                f"camera {camera_id!r}: video file {self.target} {what}; "
                "fix `url` (a path, file:///path, rtsp://..., /dev/videoN or synthetic://)"
            )
        if self.kind == "v4l2" and not os.path.exists(self.target):
            raise SourceError(
                f"camera {camera_id!r}: V4L2 device {self.target} does not exist; "
                "is the camera plugged in? (`ls /dev/video*` lists the devices)"
            )


@dataclasses.dataclass(frozen=True)
class Scheme:
    """One URL scheme.

    Attributes:
        kind: the :attr:`SourceSpec.kind` its URLs become.
        parser: ``"module:function"`` taking ``(url, camera_id)`` and
            returning a :class:`SourceSpec` (``SourceError`` for a bad URL).
        live: its streams are live by default (drop oldest frames when
            behind, reconnect when lost); files are not.
    """

    kind: str
    parser: str
    live: bool = True


@dataclasses.dataclass(frozen=True)
class DecoderKind:
    """One decoder a camera's ``decode:`` may name.

    Attributes:
        builder: ``"module:function"`` taking ``(*, stream, device)`` (the
            session's ``av.VideoStream``; where frames are left) and returning
            a :class:`streamseg.ingest.decoders.Decoder`.
        problem: ``"module:function"`` returning why the decoder cannot run
            on this machine as ``(problem, fix)``, or ``None`` when it can
            (``streamseg check`` reports it, opening the camera raises it);
            ``None``: it runs everywhere.
        on_device: it leaves frames in the memory of the model's device
            (``model.device``), not in CPU memory: cameras that use it decode
            there, and the model's own process (which takes frames from CPU
            memory) cannot run with them.
    """

    builder: str
    problem: str | None = None
    on_device: bool = False


_HERE = "streamseg.ingest.spec"

# name -> decoder: the only list of decoders (``cameras[].decode``'s choices
# come from it; ``streamseg.ingest.config`` closes it). PyAV on the CPU,
# NVIDIA DALI (NVDEC) on a GPU. Adding one: its file, plus one row here, or
# ``register_decoder`` in a plug-in (``streamseg.plugins``).
DECODERS: Table[DecoderKind] = Table(
    "decoder",
    {
        "pyav": DecoderKind("streamseg.ingest.decoders:build_pyav"),
        "dali": DecoderKind(
            "streamseg.ingest.dali:DaliDecoder",
            problem="streamseg.ingest.dali:dali_problem",
            on_device=True,
        ),
    },
)


def register_decoder(name: str, row: DecoderKind) -> None:
    """Add decoder ``name`` (a plug-in's, before ``streamseg.ingest.config`` builds the
    ``decode:`` choices; ``streamseg.registry.RegistryClosed`` after)."""
    DECODERS.register(name, row)


def decoder_problem(name: str) -> tuple[str, str] | None:
    """Why decoder ``name`` (a :data:`DECODERS` key) cannot run here, as ``(problem, fix)``;
    ``None`` when it can. Imports the decoder's module only when it has a check."""
    check = DECODERS[name].problem
    if check is None:
        return None
    problem: tuple[str, str] | None = load(check)()
    return problem


# scheme -> kind and parser. A URL without a scheme is a file path (or a
# /dev/videoN device).
SCHEMES: dict[str, Scheme] = {
    "rtsp": Scheme("rtsp", f"{_HERE}:parse_network_url"),
    "rtsps": Scheme("rtsp", f"{_HERE}:parse_network_url"),
    "http": Scheme("network", f"{_HERE}:parse_network_url"),
    "https": Scheme("network", f"{_HERE}:parse_network_url"),
    "rtmp": Scheme("network", f"{_HERE}:parse_network_url"),
    "rtmps": Scheme("network", f"{_HERE}:parse_network_url"),
    "srt": Scheme("network", f"{_HERE}:parse_network_url"),
    "file": Scheme("file", f"{_HERE}:parse_file_url", live=False),
    "v4l2": Scheme("v4l2", f"{_HERE}:parse_v4l2_url"),
    "synthetic": Scheme("synthetic", f"{_HERE}:parse_synthetic_url"),
}


def url_scheme(url: str) -> str:
    """The lower-case scheme of ``url``; ``""`` for a plain path (``C:`` is a drive, not one)."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", url.strip())
    return m.group(1).lower() if m and len(m.group(1)) > 1 else ""


def parse_source_url(url: str, *, camera_id: str | None = "?") -> SourceSpec:
    """Parse a camera URL into a ``SourceSpec``; ``SourceError`` names any problem.

    Messages start with ``camera 'ID': `` unless ``camera_id`` is ``None``.
    """
    if not isinstance(url, str) or not url.strip():
        raise SourceError(f"{_who(camera_id)}`url` is empty")
    url = url.strip()
    scheme = url_scheme(url)
    if scheme in SCHEMES:
        spec: SourceSpec = load(SCHEMES[scheme].parser)(url, camera_id)
        return spec
    if scheme:
        raise SourceError(
            f"{_who(camera_id)}unsupported URL scheme {scheme!r} in {redact_url(url)}; "
            f"use one of {', '.join(SCHEMES)}, or a plain file path"
        )
    path, query = url, ""
    if "?" in url and not os.path.exists(url):
        path, _, query = url.partition("?")
    if re.fullmatch(r"/dev/video\d+", path):
        return _v4l2(path, query, camera_id)
    return _file(path, query, camera_id)


def _who(camera_id: str | None) -> str:
    return "" if camera_id is None else f"camera {camera_id!r}: "


def parse_network_url(url: str, camera_id: str | None) -> SourceSpec:
    """A network stream FFmpeg opens: ``scheme://[user:password@]host[:port]/path``."""
    scheme = url_scheme(url)
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018  (raises for a port out of range or not a number)
    except ValueError:
        raise SourceError(
            f"{_who(camera_id)}{redact_url(url)} has a bad port; use a number from 1 to 65535"
        ) from None
    if not parts.hostname:
        raise SourceError(
            f"{_who(camera_id)}{redact_url(url)} has no host; "
            f"expected {scheme}://[user:password@]host[:port]/path"
        )
    return SourceSpec(kind=SCHEMES[scheme].kind, target=url, display=redact_url(url))


def parse_file_url(url: str, camera_id: str | None) -> SourceSpec:
    """``file:///path?pace=1&loop=1``."""
    parts = urllib.parse.urlsplit(url)
    return _file(urllib.parse.unquote(parts.path), parts.query, camera_id)


def parse_v4l2_url(url: str, camera_id: str | None) -> SourceSpec:
    """``v4l2:///dev/videoN?size=WxH&fps=N&format=F``."""
    parts = urllib.parse.urlsplit(url)
    return _v4l2(urllib.parse.unquote(parts.path), parts.query, camera_id)


def parse_synthetic_url(url: str, camera_id: str | None) -> SourceSpec:
    """``synthetic://?seed=1&...``: the scene's keys, plus ``pace``."""
    return _synthetic(url, camera_id)


def _query(
    query: str, allowed: tuple[str, ...], camera_id: str | None, what: str
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, values in urllib.parse.parse_qs(query, keep_blank_values=True).items():
        if key not in allowed:
            raise SourceError(
                f"{_who(camera_id)}unknown option {key!r} in the {what} URL; "
                f"allowed: {', '.join(allowed)}"
            )
        out[key] = values[-1]
    return out


def _flag(opts: dict[str, str], key: str, default: bool, camera_id: str | None) -> bool:
    if key not in opts:
        return default
    v = opts[key].strip().lower()
    if v in _TRUE or v == "":
        return True
    if v in _FALSE:
        return False
    raise SourceError(f"{_who(camera_id)}URL option {key}={opts[key]!r} must be 1 or 0")


def _file(path: str, query: str, camera_id: str | None) -> SourceSpec:
    opts = _query(query, ("pace", "loop"), camera_id, "file")
    return SourceSpec(
        kind="file",
        target=path,
        display=path,
        pace=_flag(opts, "pace", False, camera_id),
        loop=_flag(opts, "loop", False, camera_id),
    )


def _v4l2(path: str, query: str, camera_id: str | None) -> SourceSpec:
    if not path:
        raise SourceError(f"{_who(camera_id)}v4l2 URL needs a device, e.g. v4l2:///dev/video0")
    opts = _query(query, ("size", "fps", "format"), camera_id, "v4l2")
    ff: dict[str, str] = {}
    if "size" in opts:
        if not re.fullmatch(r"\d+x\d+", opts["size"]):
            raise SourceError(f"{_who(camera_id)}v4l2 size must look like 640x480")
        ff["video_size"] = opts["size"]
    if "fps" in opts:
        ff["framerate"] = opts["fps"]
    if "format" in opts:
        ff["input_format"] = opts["format"]
    return SourceSpec(kind="v4l2", target=path, display=path, input_format="v4l2", options=ff)


def _synthetic(url: str, camera_id: str | None) -> SourceSpec:
    parts = urllib.parse.urlsplit(url)
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in pairs if k == "pace"}
    rest = urllib.parse.urlencode([(k, v) for k, v in pairs if k not in ours])
    return SourceSpec(
        kind="synthetic",
        target="synthetic://" + (f"?{rest}" if rest else ""),
        display=redact_url(url),
        pace=_flag(ours, "pace", True, camera_id),
    )
