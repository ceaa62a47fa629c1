"""Each registry is the one list: config schema, validators and CLI choices derive from it.

A registry entry the config or the CLI does not offer (or one they offer that
the registry does not have) fails here.
"""

from __future__ import annotations

import argparse
import io
import typing
from typing import Any

import av
import numpy as np
import pydantic
import pytest

from streamseg.cli import build_parser
from streamseg.ingest.config import CameraConfig
from streamseg.ingest.spec import SCHEMES, parse_source_url
from streamseg.models import ARCHITECTURES, FAMILIES, PRECISIONS, archs_of
from streamseg.registry import load
from streamseg.segment.backends import BACKENDS
from streamseg.segment.config import ModelConfig
from streamseg.track.alerts import CameraAlerts
from streamseg.track.rule_kinds import RULE_KINDS
from streamseg.track.rules.base import RuleBase
from streamseg.train.config import SolverConfig


def _enum(model: type[pydantic.BaseModel], field: str) -> list[str]:
    values: list[str] = model.model_json_schema()["properties"][field]["enum"]
    return values


def _choices(*command: str) -> dict[str, tuple[str, ...] | None]:
    """``--option -> choices`` of one CLI command (``bench model`` is two words)."""
    parser = build_parser(list(command))
    for word in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return {
        a.option_strings[0]: tuple(a.choices) if a.choices is not None else None
        for a in parser._actions
        if a.option_strings
    }


@pytest.mark.parametrize(
    ("field", "registry"),
    [("arch", ARCHITECTURES), ("precision", PRECISIONS), ("backend", BACKENDS)],
)
def test_model_config_offers_exactly_the_registry(field: str, registry: dict[str, Any]) -> None:
    assert _enum(ModelConfig, field) == list(registry)
    for name in registry:
        extra = {"aot_package": "m.pt2", "device": "cuda"} if field == "backend" else {}
        assert getattr(ModelConfig(**{field: name, **extra}), field) == name
    with pytest.raises(pydantic.ValidationError, match=f"unknown {field} 'nope'; valid: "):
        ModelConfig(**{field: "nope"})


def test_training_config_offers_every_precision() -> None:
    assert _enum(SolverConfig, "precision") == list(PRECISIONS)


@pytest.mark.parametrize(
    ("command", "option", "registry"),
    [
        (("export",), "--arch", tuple(ARCHITECTURES)),
        (("export",), "--precision", tuple(PRECISIONS)),
        (("eval",), "--arch", tuple(ARCHITECTURES)),
        (("eval",), "--precision", tuple(PRECISIONS)),
        (("label",), "--arch", tuple(ARCHITECTURES)),
        (("label",), "--precision", tuple(PRECISIONS)),
        (("bench", "model"), "--arch", tuple(ARCHITECTURES)),
        (("bench", "model"), "--precision", tuple(PRECISIONS)),
        (("bench", "model"), "--backend", tuple(BACKENDS)),
        (("bench", "track"), "--detector", archs_of("maskrcnn")),
    ],
)
def test_cli_choices_are_the_registry(
    command: tuple[str, ...], option: str, registry: tuple[str, ...]
) -> None:
    assert _choices(*command)[option] == registry


def test_every_architecture_builds_from_its_row() -> None:
    for name, arch in ARCHITECTURES.items():
        assert callable(load(arch.builder)), name
        assert arch.family in FAMILIES, name
    assert {a.family for a in ARCHITECTURES.values()} == set(FAMILIES)


def test_every_backend_row_loads() -> None:
    for name, kind in BACKENDS.items():
        assert callable(load(kind.builder)), name
        if kind.problems is not None:
            assert callable(load(kind.problems)), name


# One URL per scheme of the table; each must pass the config and parse to the row's kind.
_EXAMPLES = {
    "rtsp": "rtsp://u:pw@cam:554/s",
    "network": "{scheme}://cam:9000/live",
    "file": "file:///data/a.mp4",
    "v4l2": "v4l2:///dev/video0",
    "synthetic": "synthetic://?seed=1",
}


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_config_accepts_every_scheme_ingest_opens(scheme: str) -> None:
    row = SCHEMES[scheme]
    url = _EXAMPLES[row.kind].replace("rtsp://", f"{scheme}://").format(scheme=scheme)
    assert CameraConfig(id="a", url=url).url == url
    assert parse_source_url(url).kind == row.kind
    assert callable(load(row.parser))


def test_config_refuses_a_scheme_ingest_does_not_open() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        CameraConfig(id="a", url="ftp://h/a.mp4")
    message = str(info.value)
    assert "unsupported URL scheme 'ftp'" in message
    assert all(scheme in message for scheme in SCHEMES)


def test_rule_types_are_the_registry() -> None:
    field = CameraAlerts.model_fields["rules"].annotation
    (union,) = typing.get_args(field)
    members = typing.get_args(typing.get_args(union)[0])
    assert [m.model_fields["type"].annotation.__args__[0] for m in members] == list(RULE_KINDS)
    for name, kind in RULE_KINDS.items():
        engine = load(kind.engine)
        assert issubclass(engine, RuleBase), name
        assert "from_config" in vars(engine), f"{kind.engine} does not build from its config"


def test_an_unknown_rule_type_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="'zone', 'line', 'dwell', 'crowding'"):
        CameraAlerts.model_validate({"rules": [{"name": "r", "type": "speeding"}]})


def test_camera_decode_is_the_decoder_list() -> None:
    from streamseg.ingest.config import CameraConfig
    from streamseg.ingest.spec import DECODERS

    assert _enum(CameraConfig, "decode") == list(DECODERS)
    with pytest.raises(pydantic.ValidationError, match="unknown decoder 'nvdec'; valid: "):
        CameraConfig(id="c", url="synthetic://?seed=1", decode="nvdec")


def test_every_decoder_row_loads() -> None:
    """Each row's builder and check import; the check answers ``(problem, fix)`` or ``None``;
    the ``pyav`` row decodes a real stream."""
    from streamseg.ingest.decoders import PyAVDecoder, make_decoder
    from streamseg.ingest.spec import DECODERS, SourceError, decoder_problem

    for name, kind in DECODERS.items():
        assert callable(load(kind.builder)), name
        problem = decoder_problem(name)
        assert problem is None or (len(problem) == 2 and all(problem)), (name, problem)
    assert decoder_problem("pyav") is None and not DECODERS["pyav"].on_device
    with av.open(io.BytesIO(_tiny_clip()), "r") as container:
        stream = container.streams.video[0]
        decoder = make_decoder("pyav", stream=stream)
        assert isinstance(decoder, PyAVDecoder)
        pictures = [p for packet in container.demux(stream) for p in decoder.decode(packet)]
        assert [tuple(p.image().shape) for p in pictures] == [(32, 48, 3)] * 2
        with pytest.raises(SourceError, match="unknown decode backend 'nvdec'"):
            make_decoder("nvdec", stream=stream)


def _tiny_clip() -> bytes:
    """Two 48x32 frames of MPEG-4 in Matroska."""
    out = io.BytesIO()
    with av.open(out, "w", format="matroska") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 48, 32, "yuv420p"
        for i in range(2):
            image = np.full((32, 48, 3), 40 * i, dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode(None))
    return out.getvalue()
