"""``sinks:``: validated at load time with the YAML line, built from the one registry."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from streamseg.config import ConfigError, load_pipeline
from streamseg.publish.buffered import BufferedSink
from streamseg.publish.sink_config import PRIMARY_SINK, SINK_TYPES
from streamseg.publish.sinks import build_sinks

HEAD = "cameras:\n  - id: cam\n    url: synthetic://?seed=1\n"


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "pipeline.yaml"
    path.write_text(HEAD + text)
    return load_pipeline(path, environ={"CENTRAL_PW": "c-pw-19"})


def test_sinks_build_in_order_with_their_own_settings(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "redis:\n  url: redis://127.0.0.1:1/0\n"
        "sinks:\n"
        "  - type: redis\n    name: central\n    url: redis://127.0.0.1:2/0\n"
        "    password: ${CENTRAL_PW}\n    stream_prefix: site7\n",
    )
    sinks = build_sinks(redis=config.redis, sinks=config.sinks)
    assert [s.name for s in sinks] == [PRIMARY_SINK, "central"]
    health = sinks[1].health()
    assert health.type == "redis" and not health.connected and health.buffered == 0
    central = config.sinks[0]
    assert central.password.get_secret_value() == "c-pw-19"  # type: ignore[attr-defined]
    assert "c-pw-19" not in repr(config)


@pytest.mark.parametrize(
    ("entry", "line", "words"),
    [
        ("  - type: redis\n    name: redis\n", 4, ["already used", "redis: section"]),
        ("  - type: redis\n    name: Central Site\n", 6, ["lowercase"]),
        ("  - type: kafka\n    name: x\n", 4, ["unknown type 'kafka'", "known types: redis, mqtt"]),
        ("  - type: redis\n    name: c\n    urll: redis://h/0\n", 7, ["unknown key", "url"]),
        ("  - name: c\n", 4, ["sinks[0].type: type is required", "one of: redis, mqtt"]),
    ],
    ids=["primary_name", "bad_name", "unknown_type", "unknown_key", "no_type"],
)
def test_bad_sink_entries_name_the_line(
    tmp_path: Path, entry: str, line: int, words: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "sinks:\n" + entry)
    text = info.value.format()
    assert text.count("sinks") >= 1, text
    for word in words:
        assert word in text, text
    lines = [issue.line for issue in info.value.issues]
    assert all(n is not None and 4 <= n <= 7 for n in lines), (lines, text)


def test_two_sinks_of_one_name_are_refused(tmp_path: Path) -> None:
    entry = "  - type: redis\n    name: c\n"
    with pytest.raises(ConfigError, match="already used by another sink"):
        load(tmp_path, "sinks:\n" + entry + entry)


def test_the_registry_is_the_only_list() -> None:
    """Each type's config model declares that type, and its builder makes that type of sink."""
    from streamseg.registry import load

    for type_, entry in SINK_TYPES.items():
        declared = typing.get_args(entry.config.model_fields["type"].annotation)
        assert declared == (type_,)
        assert callable(load(entry.build))
    from streamseg.publish.redis_streams import RedisStreamsSink

    assert issubclass(RedisStreamsSink, BufferedSink) and RedisStreamsSink.type == "redis"


@pytest.mark.parametrize("off", ["console", "snapshots", "enabled"])
def test_mqtt_snapshots_need_the_consoles_snapshots(tmp_path: Path, off: str) -> None:
    entry = "  - type: mqtt\n    name: ha\n    snapshots: {enabled: true, max_kb: 64}\n"
    config = load(tmp_path, "sinks:\n" + entry)  # the console keeps snapshots by default
    assert config.sinks[0].snapshots.max_kb == 64  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "sinks:\n" + entry + f"http:\n  {off}: false\n")
    (issue,) = info.value.issues
    assert issue.path == "sinks[0].snapshots.enabled" and issue.line == 7, info.value.format()
    assert f"http.{off} is false" in issue.message and "snapshots.enabled: false" in str(issue.hint)
