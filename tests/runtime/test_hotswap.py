"""Hot swap: a Segmenter loads a new checkpoint between batches; a bad one keeps the old;
with a swap token, requests without it (or with another) are refused and counted."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

import streamseg.segment.segmenter as segment
from streamseg.publish.connect import redis_client
from streamseg.publish.redis_config import RedisConfig
from streamseg.runtime.hotswap import SwapController, request_swap, status_key, wait_for_status
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import Frame, FrameBatch, Instances
from tests.support.checkpoints import NAMES, random_checkpoint


def _frames() -> Iterator[Frame]:
    scene = SyntheticScene.from_url("synthetic://?seed=6&width=96&height=64&objects=3")
    seq = 0
    while True:
        yield Frame(
            camera_id="c", seq=seq, pts=seq / 15, capture_time=0.0, image=scene.frame(seq).image
        )
        seq += 1


def _same(a: Instances, b: Instances) -> bool:
    """Same detections (up to the float rounding of a batch of 2 against 1)."""
    return (
        len(a) == len(b) > 0
        and torch.allclose(a.boxes, b.boxes, atol=1e-3)
        and torch.allclose(a.scores, b.scores, atol=1e-5)
    )


class _Service:
    """The part of `serve` a swap touches: batches through a Segmenter, swaps in between."""

    def __init__(self, seg: object, controller: SwapController) -> None:
        self.seg, self.controller = seg, controller
        self.done: list[tuple[Frame, str, Instances]] = []  # frame, weights used, result
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        frames = _frames()
        while not self.stop.is_set():
            self.controller.apply_pending(self.seg)  # type: ignore[arg-type]
            batch = FrameBatch((next(frames), next(frames)))
            weights = self.seg.weights  # type: ignore[attr-defined]
            for frame, inst in zip(batch, self.seg.segment(batch), strict=True):  # type: ignore[attr-defined]
                self.done.append((frame, weights, inst))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def test_swap_over_redis_between_batches(redis_server, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    a, b = random_checkpoint(tmp_path / "a.pth", 0), random_checkpoint(tmp_path / "b.pth", 1)
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(b.read_bytes()[:2000])
    three = random_checkpoint(tmp_path / "three.pth", 2, NAMES[:3])  # another class count
    seg = segment.Segmenter(arch="maskrcnn_small", weights=str(a))
    controller = SwapController(
        client_factory=lambda: redis_client(RedisConfig(url=redis_server.url)),
        prefix="t",
        poll_s=0.1,
    ).start()
    service = _Service(seg, controller)
    try:
        swap = ["swap", "--redis", redis_server.url, "--prefix", "t", "--wait", "60"]
        ok = cli(*swap, str(b))
        assert ok.returncode == 0, ok.stderr
        status = json.loads(ok.stdout)
        assert status["ok"] and status["weights"] == str(b) and status["error"] is None
        for bad, reason in ((truncated, "could not be read"), (three, "shape")):
            refused = cli(*swap, str(bad))
            assert refused.returncode == 1 and "kept its old model" in refused.stderr
            assert reason in json.loads(refused.stdout)["error"]
        missing = cli(*swap, str(tmp_path / "nope.pth"))
        assert missing.returncode == 1 and "does not exist" in missing.stderr
        n = len(service.done)
        while len(service.done) < n + 4:  # a few batches after the failed swaps
            service.thread.join(timeout=0.05)
    finally:
        service.close()
        controller.close()
    # No frame lost or repeated, and every frame ran on A, then (from one batch on) B.
    assert [f.seq for f, _, _ in service.done] == list(range(len(service.done)))
    used = [w for _, w, _ in service.done]
    switch = used.index(str(b))
    assert switch % 2 == 0 and set(used[:switch]) == {str(a)} and set(used[switch:]) == {str(b)}
    assert seg.weights == str(b) and seg.class_names == tuple(NAMES)
    # Results before the swap are A's own, after it B's (which differ from A's).
    fresh = {p: segment.Segmenter(arch="maskrcnn_small", weights=str(p)) for p in (a, b)}
    for path, (frame, _, inst) in ((a, service.done[0]), (b, service.done[-1])):
        (expected,) = fresh[path].segment(FrameBatch((frame,)))
        (other,) = fresh[b if path == a else a].segment(FrameBatch((frame,)))
        assert _same(inst, expected) and not _same(inst, other)


def test_swap_token_required(redis_server, tmp_path: Path, cli, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    token = "tok-6f1d0c"
    a, b = random_checkpoint(tmp_path / "a.pth", 0), random_checkpoint(tmp_path / "b.pth", 1)
    seg = segment.Segmenter(arch="maskrcnn_small", weights=str(a))
    refused: list[str] = []
    cfg = RedisConfig(url=redis_server.url)
    controller = SwapController(
        client_factory=lambda: redis_client(cfg),
        prefix="t",
        poll_s=0.1,
        token=token,
        on_refused=refused.append,
    ).start()
    client = redis_client(cfg)
    try:
        for sent, reason in ((None, "missing_token"), ("tok-wrong", "wrong_token")):
            request_id = request_swap(client, "t", str(b), token=sent)
            status = wait_for_status(client, "t", request_id, after="0-0", timeout_s=30)
            assert status is not None and status["ok"] is False
            assert status["error"].startswith("refused:") and "swap_token" in status["error"]
            assert refused[-1] == reason
        assert controller.refused == 2 and not controller.has_pending()
        # `streamseg swap` sends the token from $STREAMSEG_SWAP_TOKEN.
        swap = ["swap", "--redis", redis_server.url, "--prefix", "t", "--wait", "60", str(b)]
        without = cli(*swap)
        assert without.returncode == 1 and "refused" in without.stderr
        monkeypatch.setenv("STREAMSEG_SWAP_TOKEN", token)
        service = _Service(seg, controller)
        try:
            ok = cli(*swap)
        finally:
            service.close()
        assert ok.returncode == 0, ok.stderr
        assert seg.weights == str(b)
        assert refused == ["missing_token", "wrong_token", "missing_token"]
        assert controller.refused == 3
    finally:
        controller.close()
    # Refusals are logged, the token never is; the request on Redis is the sender's business.
    assert caplog.text.count("refused") >= 3
    assert token not in caplog.text and "tok-wrong" not in caplog.text
    answers = client.xrange(status_key("t"))
    assert all(token.encode() not in fields[b"data"] for _id, fields in answers)
