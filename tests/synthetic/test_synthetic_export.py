"""write_scene: the video, COCO JSON and MOT gt.txt agree with the scene's ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from streamseg.synthetic.export import scene_url, write_scene
from streamseg.synthetic.scene import SyntheticScene

H, W, N, FPS = 96, 128, 12, 10.0


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticScene, Path, dict]:
    scene = SyntheticScene(seed=4, height=H, width=W, fps=FPS, num_objects=7)
    out = tmp_path_factory.mktemp("scene")
    summary = write_scene(scene, out, num_frames=N, frames_png=True)
    return scene, out, summary


def test_summary(exported: tuple[SyntheticScene, Path, dict]) -> None:
    scene, out, summary = exported
    assert summary["frames"] == N and summary["out"] == str(out)
    assert summary["files"] == ["annotations.json", "frames/", "gt.txt", "scene.mp4", "seqinfo.ini"]
    total = sum(len(scene.frame(i).gt) for i in range(N))
    assert summary["annotations"] == total > 0
    assert SyntheticScene.from_url(summary["url"]).frame(3).image.equal(scene.frame(3).image)
    assert "seqLength=12" in (out / "seqinfo.ini").read_text()


def test_video_has_every_frame_at_constant_rate(
    exported: tuple[SyntheticScene, Path, dict],
) -> None:
    scene, out, _ = exported
    with av.open(str(out / "scene.mp4")) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
        assert stream.average_rate == FPS
        decoded = list(container.decode(video=0))
    assert len(decoded) == N
    for i, frame in enumerate(decoded):
        assert (frame.height, frame.width) == (H, W)
        assert frame.time == pytest.approx(i / FPS, abs=1e-3)
        rgb = torch.from_numpy(frame.to_ndarray(format="rgb24")).float()
        # Lossy (crf 18, 4:2:0 chroma) but the same picture.
        assert float((rgb - scene.frame(i).image.float()).abs().mean()) < 8.0


def test_pngs_are_lossless(exported: tuple[SyntheticScene, Path, dict]) -> None:
    scene, out, _ = exported
    for i in (0, N - 1):
        with av.open(str(out / "frames" / f"{i:06d}.png")) as container:
            pixels = next(container.decode(video=0)).to_ndarray(format="rgb24")
        assert np.array_equal(pixels, scene.frame(i).image.numpy())


def test_coco_json_decodes_to_the_gt_masks(exported: tuple[SyntheticScene, Path, dict]) -> None:
    from faster_coco_eval import COCO

    scene, out, _ = exported
    raw = json.loads((out / "annotations.json").read_text())
    assert [c["name"] for c in raw["categories"]] == ["disc", "square", "triangle", "star"]
    assert [c["id"] for c in raw["categories"]] == [1, 2, 3, 4]
    coco = COCO(str(out / "annotations.json"))
    assert sorted(coco.getImgIds()) == list(range(1, N + 1))
    checked = 0
    for i in range(N):
        gt = scene.frame(i).gt
        info = coco.loadImgs([i + 1])[0]
        assert info["file_name"] == f"frames/{i:06d}.png" and info["frame_index"] == i
        assert info["video"] == "scene.mp4" and (info["width"], info["height"]) == (W, H)
        anns = sorted(coco.loadAnns(coco.getAnnIds(imgIds=[i + 1])), key=lambda a: a["track_id"])
        assert [a["track_id"] for a in anns] == gt.track_ids.tolist()
        assert [a["category_id"] for a in anns] == gt.labels.tolist()
        for ann, box, mask in zip(anns, gt.boxes.tolist(), gt.masks, strict=True):
            assert isinstance(ann["segmentation"]["counts"], str)
            decoded = torch.from_numpy(coco.annToMask(ann).astype(bool))
            assert torch.equal(decoded, mask)
            x1, y1, x2, y2 = box
            assert ann["bbox"] == [x1, y1, x2 - x1, y2 - y1]
            assert ann["area"] == float(mask.sum()) and ann["iscrowd"] == 0
            checked += 1
    assert checked > N


@pytest.mark.filterwarnings("ignore:Operation with tuple is deprecated")
def test_mot_gt_lines_match_the_boxes(exported: tuple[SyntheticScene, Path, dict]) -> None:
    scene, out, _ = exported
    rows = [line.split(",") for line in (out / "gt.txt").read_text().splitlines()]
    assert all(len(r) == 9 for r in rows)
    expected = []
    for i in range(N):
        f = scene.frame(i)
        for box, tid, label, vis in zip(
            f.gt.boxes.tolist(),
            f.gt.track_ids.tolist(),
            f.gt.labels.tolist(),
            f.visibility.tolist(),
            strict=True,
        ):
            x1, y1, x2, y2 = box
            # bb_left/bb_top are MOTChallenge's 1-based pixel coordinates.
            expected.append((i + 1, tid, x1 + 1, y1 + 1, x2 - x1, y2 - y1, 1, label, round(vis, 4)))
    parsed = [
        (
            int(r[0]),
            int(r[1]),
            float(r[2]),
            float(r[3]),
            float(r[4]),
            float(r[5]),
            int(r[6]),
            int(r[7]),
            float(r[8]),
        )
        for r in rows
    ]
    assert parsed == expected
    import motmetrics

    # motmetrics reads them back as 0-based corners: our boxes' x1, y1.
    df = motmetrics.io.loadtxt(str(out / "gt.txt"), fmt="mot15-2D")
    assert len(df) == len(expected)
    assert df["X"].tolist() == [e[2] - 1 for e in expected]
    assert df["Y"].tolist() == [e[3] - 1 for e in expected]
    assert df["Width"].tolist() == [e[4] for e in expected]


def test_video_only_and_errors(tmp_path: Path) -> None:
    scene = SyntheticScene(seed=1, height=H, width=W, num_frames=3)
    summary = write_scene(scene, tmp_path / "a")
    assert summary["frames"] == 3 and not (tmp_path / "a" / "frames").exists()
    coco = json.loads((tmp_path / "a" / "annotations.json").read_text())
    assert {img["file_name"] for img in coco["images"]} == {"scene.mp4"}
    with pytest.raises(ValueError, match="even width and height"):
        write_scene(SyntheticScene(height=H, width=W + 1), tmp_path / "b", num_frames=2)
    with pytest.raises(ValueError, match="endless"):
        write_scene(SyntheticScene(height=H, width=W), tmp_path / "c")
    with pytest.raises(ValueError, match="num_frames must be"):
        write_scene(scene, tmp_path / "d", num_frames=4)
    # Odd sizes work without the video.
    write_scene(SyntheticScene(height=H, width=W + 1), tmp_path / "e", num_frames=1, video=False)
    assert (tmp_path / "e" / "gt.txt").exists() and not (tmp_path / "e" / "scene.mp4").exists()
    assert scene_url(scene).startswith("synthetic://?seed=1&width=128&height=96")
