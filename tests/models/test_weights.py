"""``streamseg weights get | verify | list`` against a real HTTP server on loopback.

The catalogue is a test file (``$STREAMSEG_WEIGHTS_CATALOGUE``) whose entries
point at ``tests.support.httpfiles.FileServer``; the cache is a temporary
folder (``$STREAMSEG_WEIGHTS_DIR``). The downloaded file is a real
``maskrcnn_small`` checkpoint, so ``verify --load`` loads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamseg.cli import main
from streamseg.models.weights import load_catalogue
from tests.segment.backend_cases import write_checkpoint
from tests.support.httpfiles import FileServer

NAME = "small-test"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("ckpt") / "small.pth"
    return Path(write_checkpoint(path, seed=3)).read_bytes()


@pytest.fixture
def server(checkpoint: bytes) -> Iterator[FileServer]:
    srv = FileServer().start()
    srv.files["/w/small.pth"] = checkpoint
    try:
        yield srv
    finally:
        srv.stop()


def write_catalogue(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"entries": list(entries)}))
    return path


def entry(url: str, data: bytes | None, **changes: Any) -> dict[str, Any]:
    """A catalogue entry for ``data`` served at ``url`` (its true size and sha256)."""
    base = {
        "name": NAME,
        "arch": "maskrcnn_small",
        "classes": "checkpoint",
        "url": url,
        "filename": "small-test.pth",
        "size": len(data) if data is not None else None,
        "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
        "licence": "test",
    }
    return base | changes


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    cache = tmp_path / "cache"
    catalogue = tmp_path / "catalogue.json"
    monkeypatch.setenv("STREAMSEG_WEIGHTS_DIR", str(cache))
    monkeypatch.setenv("STREAMSEG_WEIGHTS_CATALOGUE", str(catalogue))
    return {"cache": cache, "catalogue": catalogue}


def weights(*args: str) -> int:
    return main(["weights", *args, "--no-progress"] if args[0] == "get" else ["weights", *args])


def test_get_then_verify_and_load(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), checkpoint))
    assert weights("get", NAME) == 0
    path = env["cache"] / "small-test.pth"
    assert capsys.readouterr().out.strip() == str(path)
    assert path.read_bytes() == checkpoint
    assert os.listdir(env["cache"]) == ["small-test.pth"]  # no .part left behind
    assert weights("verify", str(path), "--load") == 0
    out = capsys.readouterr().out
    assert f"OK: {NAME}" in out and "loads as maskrcnn_small" in out
    # A second get finds the file and downloads nothing.
    assert weights("get", NAME) == 0
    assert server.requests == [("/w/small.pth", None)]
    assert weights("list") == 0
    assert f"{NAME}  [cached]" in capsys.readouterr().out


def test_wrong_hash_is_refused_and_deleted(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = hashlib.sha256(b"other bytes").hexdigest()
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), checkpoint, sha256=wrong))
    assert weights("get", NAME) == 1
    err = capsys.readouterr().err
    assert "sha256 mismatch" in err and wrong in err and "deleted" in err
    assert not env["cache"].exists() or os.listdir(env["cache"]) == []


def test_interrupted_download_resumes_with_a_range_request(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), checkpoint))
    cut = len(checkpoint) // 3
    server.cut_once["/w/small.pth"] = cut
    assert weights("get", NAME) == 1
    err = capsys.readouterr().err
    assert f"interrupted after {cut} bytes" in err and f"streamseg weights get {NAME}" in err
    part = env["cache"] / "small-test.pth.part"
    assert part.stat().st_size == cut
    assert not (env["cache"] / "small-test.pth").exists()  # nothing where a model loads

    assert weights("get", NAME) == 0
    assert server.requests == [("/w/small.pth", None), ("/w/small.pth", f"bytes={cut}-")]
    final = env["cache"] / "small-test.pth"
    assert hashlib.sha256(final.read_bytes()).digest() == hashlib.sha256(checkpoint).digest()
    assert not part.exists()


def test_a_server_that_ignores_ranges_restarts_the_file(
    server: FileServer, checkpoint: bytes, env: dict[str, Path]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), checkpoint))
    server.cut_once["/w/small.pth"] = 1000
    server.ignore_range = True
    assert weights("get", NAME) == 1
    assert weights("get", NAME) == 0
    assert server.requests[-1] == ("/w/small.pth", "bytes=1000-")
    assert (env["cache"] / "small-test.pth").read_bytes() == checkpoint


def test_not_found_is_a_clear_error(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/gone.pth"), checkpoint))
    assert weights("get", NAME) == 1
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "check the entry's url" in err and "Traceback" not in err
    assert not (env["cache"] / "small-test.pth").exists()


def test_refused_connection_is_a_clear_error(
    checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write_catalogue(env["catalogue"], entry(f"http://127.0.0.1:{port}/w.pth", checkpoint))
    assert weights("get", NAME) == 1
    err = capsys.readouterr().err
    assert f"cannot reach 127.0.0.1:{port}" in err and "refused" in err.lower()


def test_prefix_hash_is_checked_as_a_prefix(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = hashlib.sha256(checkpoint).hexdigest()[:8]
    url = server.url("/w/small.pth")
    write_catalogue(env["catalogue"], entry(url, checkpoint, sha256=prefix, size=None))
    assert weights("get", NAME) == 0
    assert weights("verify", str(env["cache"] / "small-test.pth")) == 0
    assert "published 8-digit prefix" in capsys.readouterr().out
    bad = "0" * 8 if prefix != "0" * 8 else "1" * 8
    write_catalogue(env["catalogue"], entry(url, checkpoint, sha256=bad, size=None))
    assert weights("verify", str(env["cache"] / "small-test.pth")) == 1
    assert "MISMATCH" in capsys.readouterr().err


def test_an_entry_without_a_hash_needs_allow_unverified(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), None))
    assert weights("get", NAME) == 2
    assert "--allow-unverified" in capsys.readouterr().err
    assert server.requests == []
    assert weights("get", NAME, "--allow-unverified") == 0
    assert hashlib.sha256(checkpoint).hexdigest() in capsys.readouterr().err


def test_verify_a_changed_file_and_an_unknown_file(
    server: FileServer, checkpoint: bytes, env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry(server.url("/w/small.pth"), checkpoint))
    assert weights("get", NAME) == 0
    path = env["cache"] / "small-test.pth"
    path.write_bytes(checkpoint[:-1] + bytes([checkpoint[-1] ^ 1]))
    assert weights("verify", str(path)) == 1
    assert "MISMATCH" in capsys.readouterr().err
    other = path.with_name("other.bin")
    other.write_bytes(b"x")
    assert weights("verify", str(other)) == 1
    assert "not in the catalogue" in capsys.readouterr().err


def test_bad_catalogues_name_the_problem(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_catalogue(env["catalogue"], entry("http://x/y", b"", arch="resnet9000"))
    assert weights("list") == 2
    assert "arch 'resnet9000' is not one of" in capsys.readouterr().err
    write_catalogue(env["catalogue"], entry("ftp://x/y", b""))
    assert weights("list") == 2
    assert "url must be http(s)" in capsys.readouterr().err
    write_catalogue(env["catalogue"], entry("http://x/y", b"", sha256="XYZ"))
    assert weights("list") == 2
    assert "sha256 must be" in capsys.readouterr().err


def test_the_shipped_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries issue 16 asks for; digests are whole or a prefix torchvision publishes."""
    monkeypatch.delenv("STREAMSEG_WEIGHTS_CATALOGUE", raising=False)
    catalogue = load_catalogue()
    archs = {e.arch for e in catalogue.values()}
    assert {
        "maskrcnn_r50_fpn",
        "maskrcnn_r50_fpn_v2",
        "mask2former_r50",
        "mask2former_swin_t",
    } <= archs
    files = {e.filename: e for e in catalogue.values()}
    for name in (
        "maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth",
        "maskrcnn_resnet50_fpn_v2_coco-73cbd019.pth",
    ):
        published = name.rsplit("-", 1)[1][:8]  # torchvision's file names carry the prefix
        digest = files[name].sha256
        assert digest is not None and digest.startswith(published)
    assert files["model_final_f10217.pkl"].arch == "maskrcnn_r50_fpn"
