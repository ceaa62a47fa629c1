"""COCO datasets, label mapping by name, transforms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from streamseg.models import InputSpec
from streamseg.segment.preprocess import preprocess, resized_size
from streamseg.synthetic.scene import SyntheticScene
from streamseg.train.data import CocoDataset, DatasetError, Sample, SyntheticDataset, UnionDataset
from streamseg.train.datasets import resolve_class_names
from streamseg.train.transforms import TrainTransform, hflip, resize_targets, train_batch
from tests.support.coco import write_coco


def test_coco_dataset_loads_polygons_and_rle(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir)
    assert ds.native_class_names == ("red", "green")
    names = resolve_class_names(None, ds)
    assert names == ("__background__", "red", "green")
    ds.set_class_names(names)
    data = json.loads(coco_dir.read_text())
    for i in range(len(ds)):
        s = ds[i]
        assert s.image.dtype == torch.uint8 and s.image.shape == (48, 64, 3)
        anns = [a for a in data["annotations"] if a["image_id"] == 100 + i and not a["iscrowd"]]
        assert len(s) == len(anns)
        for box, label, mask, ann in zip(s.boxes, s.labels, s.masks, anns, strict=True):
            x, y, w, h = ann["bbox"]
            assert box.tolist() == [x, y, x + w, y + h]
            assert int(label) == (1 if ann["category_id"] == 7 else 2)
            # Mask and box agree, whether the mask came from RLE or a polygon.
            ys, xs = torch.nonzero(mask, as_tuple=True)
            assert [
                int(xs.min()),
                int(ys.min()),
                int(xs.max()) + 1,
                int(ys.max()) + 1,
            ] == box.int().tolist()
            assert int(mask.sum()) == w * h
            # The pixels under the mask are the category's colour.
            colour = s.image[mask].float().mean(0)
            assert colour[0 if label == 1 else 1] > 200


def test_crowd_regions_only_in_ground_truth(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir)
    ds.set_class_names(("__background__", "red", "green"))
    gt = ds.ground_truth(0)
    assert sum(a["iscrowd"] for a in gt.annotations) == 1
    assert len(ds[0]) == len(gt.annotations) - 1


def test_crowd_as_instances(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir, crowd_as_instances=True)
    ds.set_class_names(("__background__", "red", "green"))
    gt = ds.ground_truth(0)
    assert sum(a["iscrowd"] for a in gt.annotations) == 0
    assert len(ds[0]) == len(gt.annotations)


def test_labels_follow_training_class_order(coco_dir: Path) -> None:
    ds = CocoDataset(coco_dir)
    ds.set_class_names(("__background__", "green", "blue", "red"))
    labels = torch.cat([ds[i].labels for i in range(len(ds))])
    assert set(labels.tolist()) <= {1, 3} and 3 in labels.tolist()
    ds.set_class_names(("__background__", "green"))  # red is not trained: dropped
    assert all(set(ds[i].labels.tolist()) <= {1} for i in range(len(ds)))


def test_union_of_datasets_renumbers_images(tmp_path: Path) -> None:
    a = CocoDataset(write_coco(tmp_path / "a", images=2))
    b = CocoDataset(write_coco(tmp_path / "b", images=3, seed=1))
    u = UnionDataset([a, b])
    u.set_class_names(("__background__", "red", "green"))
    assert len(u) == 5
    assert [u[i].image_id for i in range(5)] == [0, 1, 2, 3, 4]
    assert torch.equal(u[3].image, b[1].image)
    assert u.ground_truth(4).image_id == 4


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("categories"), "missing the 'categories' list"),
        (lambda d: d["annotations"][0].update(image_id=999), "image_id=999 not in 'images'"),
        (lambda d: d["annotations"][0].update(category_id=5), "category_id=5 not in 'categories'"),
        (lambda d: d["annotations"][0].pop("segmentation"), "has no 'segmentation'"),
    ],
)
def test_bad_coco_files_are_named(coco_dir: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(coco_dir.read_text())
    mutate(data)
    coco_dir.write_text(json.dumps(data))
    with pytest.raises(DatasetError, match=message):
        CocoDataset(coco_dir)


def test_missing_image_and_wrong_size(coco_dir: Path) -> None:
    data = json.loads(coco_dir.read_text())
    data["images"][1]["width"] = 65
    data["images"][2]["file_name"] = "nope.png"
    coco_dir.write_text(json.dumps(data))
    ds = CocoDataset(coco_dir)
    with pytest.raises(DatasetError, match=r"im1\.png is 64x48 but the JSON says 65x48"):
        ds[1]
    with pytest.raises(FileNotFoundError, match=r"nope\.png"):
        ds[2]


def _sample() -> Sample:
    image = torch.zeros((40, 60, 3), dtype=torch.uint8)
    image[10:20, 5:25] = 255
    masks = torch.zeros((1, 40, 60), dtype=torch.bool)
    masks[0, 10:20, 5:25] = True
    return Sample(image, torch.tensor([[5.0, 10.0, 25.0, 20.0]]), torch.tensor([1]), masks, 0)


def test_targets_follow_the_serving_size_and_flips_keep_pixels_aligned() -> None:
    assert resized_size(40, 60, 20, 1000) == (20, 30)
    assert resized_size(40, 60, 100, 120) == (80, 120)
    s = resize_targets(_sample(), (20, 30))
    assert s.boxes.tolist() == [[2.5, 5.0, 12.5, 10.0]]
    assert s.masks.shape == (1, 20, 30) and s.input_size == (20, 30)
    assert s.image.shape == (40, 60, 3)  # preprocess resizes the image itself
    f = hflip(_sample())
    assert f.boxes.tolist() == [[35.0, 10.0, 55.0, 20.0]]
    assert bool(f.masks[0, 15, 40]) and int(f.image[15, 40, 0]) == 255
    assert not bool(f.masks[0, 15, 10])


def test_train_transform_is_a_function_of_the_generator_seed() -> None:
    t = TrainTransform(min_sizes=(20, 30, 40), max_size=100, hflip_prob=0.5)
    outs = [t(_sample(), torch.Generator().manual_seed(s)) for s in range(12)]
    again = [t(_sample(), torch.Generator().manual_seed(s)) for s in range(12)]
    assert all(torch.equal(a.image, b.image) for a, b in zip(outs, again, strict=True))
    assert all(torch.equal(a.masks, b.masks) for a, b in zip(outs, again, strict=True))
    assert {o.input_size[0] for o in outs} == {20, 30, 40}  # scale jitter
    assert len({tuple(o.boxes[0].tolist()) for o in outs if o.input_size[0] == 20}) == 2  # flips


def test_train_batch_is_preprocess_at_the_drawn_sizes() -> None:
    spec = InputSpec(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), size_divisibility=8)
    t = TrainTransform(min_sizes=(20, 30), max_size=100, hflip_prob=0.0)
    samples = [t(_sample(), torch.Generator().manual_seed(s)) for s in range(4)]
    images, sizes, targets = train_batch(samples, spec)
    assert sizes == [s.input_size for s in samples]
    for size, target in zip(sizes, targets, strict=True):
        assert tuple(target["masks"].shape[-2:]) == size and target["masks"].dtype == torch.uint8
    want = preprocess([s.image for s in samples], spec, sizes=sizes)
    assert torch.equal(images, want.images)
    # The serving rule with the drawn shorter side, white stays white (1.0).
    assert images.shape[-2:] == (32, 48)
    assert bool((images[:, :, 8, 8] == 1.0).all()) and bool((images[:, :, 0, 0] == -1.0).all())
    h = sizes[0][0]
    assert float(images[0, :, h:].abs().max()) == 0.0  # zero padding


def test_synthetic_dataset_frames_and_ground_truth() -> None:
    ds = SyntheticDataset("synthetic://?seed=3&width=96&height=64&objects=4&frames=6&stride=2")
    assert len(ds) == 6 and ds.native_class_names == ("disc", "square", "triangle", "star")
    ds.set_class_names(("__background__", "star", "disc"))  # squares, triangles not trained
    scene = SyntheticScene.from_url("synthetic://?seed=3&width=96&height=64&objects=4")
    for i in range(len(ds)):
        s = ds[i]
        frame = scene.frame(2 * i)
        assert torch.equal(s.image, frame.image)
        names = [scene.class_names[int(x)] for x in frame.gt.labels]
        assert sorted(s.labels.tolist()) == sorted(
            {"star": 1, "disc": 2}[n] for n in names if n in ("star", "disc")
        )
        gt = ds.ground_truth(i)
        assert len(gt.annotations) == len(s)
        for ann, mask in zip(gt.annotations, s.masks, strict=True):
            assert ann["area"] == float(mask.sum())
    with pytest.raises(DatasetError, match="unknown parameter 'colour'"):
        SyntheticDataset("synthetic://?seed=1&colour=red")
