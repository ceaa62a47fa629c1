"""``model.weights: <catalogue name>`` through ``streamseg check`` and ``serve``.

The catalogue (``$STREAMSEG_WEIGHTS_CATALOGUE``) names a ``maskrcnn_small``
checkpoint served by a loopback HTTP server; the cache
(``$STREAMSEG_WEIGHTS_DIR``) starts empty. Nothing is downloaded unless
``weights get`` or ``serve --download`` asks, which the server's request log
shows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.segment.backend_cases import write_checkpoint
from tests.support.httpfiles import FileServer
from tests.support.serve import checkpoint_model, write_pipeline

NAME = "small-test"
SCENE = "synthetic://?seed=1&width=160&height=96&frames=4"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FileServer]:
    data = Path(write_checkpoint(tmp_path / "small.pth", seed=2)).read_bytes()
    server = FileServer().start()
    server.files["/small.pth"] = data
    entry = {
        "name": NAME,
        "arch": "maskrcnn_small",
        "classes": "checkpoint",
        "url": server.url("/small.pth"),
        "filename": "small-test.pth",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "licence": "test",
    }
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text(json.dumps({"entries": [entry]}))
    monkeypatch.setenv("STREAMSEG_WEIGHTS_CATALOGUE", str(catalogue))
    monkeypatch.setenv("STREAMSEG_WEIGHTS_DIR", str(tmp_path / "cache"))
    try:
        yield server
    finally:
        server.stop()


def pipeline(folder: Path, **model: Any) -> str:
    config = {
        "cameras": [{"id": "cam", "url": SCENE}],
        "model": checkpoint_model(NAME, min_size=96, max_size=160, hot_swap=False, **model),
        "redis": {"url": "redis://127.0.0.1:1/0"},
        "http": {"enabled": False},
        "runtime": {"torch_threads": 1},
    }
    return str(write_pipeline(folder, config))


def test_uncached_name_stops_check_and_serve_with_the_fetch_command(
    cli, served: FileServer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = pipeline(tmp_path)
    for command in ("check", "serve"):
        proc = cli(command, path)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out
        assert "model.weights: catalogue weights 'small-test' are not downloaded yet" in out
        assert f"`streamseg weights get {NAME}`" in out and "serve --download" in out
        assert "Traceback" not in out
    assert served.requests == []  # nothing fetched behind the user's back


def test_cached_name_loads(cli, served: FileServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    get = cli("weights", "get", NAME, "--no-progress")
    assert get.returncode == 0, get.stderr
    proc = cli("check", pipeline(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "model: maskrcnn_small on cpu" in proc.stdout


def test_name_of_another_arch_names_the_arch_to_set(
    cli, served: FileServer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    proc = cli("check", pipeline(tmp_path, arch="maskrcnn_r50_fpn"))
    assert proc.returncode == 2
    assert "model.arch: catalogue weights 'small-test' are 'maskrcnn_small' weights" in proc.stderr
    assert "set `arch: maskrcnn_small`" in proc.stderr


def test_serve_download_fetches_before_the_start_up_checks(
    cli, served: FileServer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The download comes first; a later start-up mistake (a missing clip) still stops serve.

    (Serving to the end would cost minutes of CPU here; that the cached name
    loads is ``test_cached_name_loads``.)
    """
    path = pipeline(tmp_path)
    config = json.loads(Path(path).read_text())
    config["cameras"] = [{"id": "cam", "url": "file:///nowhere/clip.mp4"}]
    Path(path).write_text(json.dumps(config))
    proc = cli("serve", path, "--download", "--no-status")
    assert proc.returncode == 2, proc.stderr
    assert served.requests == [("/small.pth", None)]
    assert (tmp_path / "cache" / "small-test.pth").is_file()
    assert "catalogue weights small-test are at" in proc.stderr
    assert "cameras[0].url" in proc.stderr and "model.weights" not in proc.stderr


def test_serve_download_failure_exits_1(cli, served: FileServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    del served.files["/small.pth"]
    proc = cli("serve", pipeline(tmp_path), "--download", "--no-status")
    assert proc.returncode == 1, proc.stderr
    assert "HTTP 404" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "small-test.pth").exists()
