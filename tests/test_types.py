import pytest
import torch

from streamseg.types import Event, Frame, FrameBatch, Instances


def make_instances(n: int, h: int = 8, w: int = 10) -> Instances:
    return Instances(
        image_size=(h, w),
        boxes=torch.rand(n, 4) * 5,
        scores=torch.linspace(0, 1, n),
        labels=torch.arange(n) + 1,
        masks=torch.zeros(n, h, w, dtype=torch.bool),
    )


def test_instances_indexing_and_len() -> None:
    inst = make_instances(5)
    assert len(inst) == 5
    keep = inst[inst.scores > 0.5]
    assert len(keep) == 2 and keep.masks is not None and keep.masks.shape == (2, 8, 10)
    assert len(inst[1]) == 1 and int(inst[1].labels[0]) == 2
    assert len(inst[-1]) == 1 and int(inst[-1].labels[0]) == 5
    assert len(inst[[0, 2]]) == 2
    assert len(Instances.empty((4, 4))) == 0


def test_instances_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="scores"):
        Instances(
            image_size=(2, 2),
            boxes=torch.zeros(3, 4),
            scores=torch.zeros(2),
            labels=torch.zeros(3, dtype=torch.int64),
        )
    with pytest.raises(ValueError, match="masks"):
        Instances(
            image_size=(2, 2),
            boxes=torch.zeros(1, 4),
            scores=torch.zeros(1),
            labels=torch.zeros(1, dtype=torch.int64),
            masks=torch.zeros(1, 3, 3, dtype=torch.bool),
        )


def test_replace_does_not_mutate() -> None:
    inst = make_instances(3)
    tracked = inst.replace(track_ids=torch.tensor([4, 5, 6]))
    assert inst.track_ids is None and tracked.track_ids is not None
    assert len(Instances.cat([inst, inst])) == 6


def test_frame_checks_image_layout() -> None:
    f = Frame(
        camera_id="c",
        seq=0,
        pts=0.0,
        capture_time=1.0,
        image=torch.zeros(4, 6, 3, dtype=torch.uint8),
    )
    assert f.size == (4, 6)
    assert f.without_image().image.numel() == 0
    with pytest.raises(ValueError, match="uint8"):
        Frame(camera_id="c", seq=0, pts=0.0, capture_time=1.0, image=torch.zeros(3, 4, 6))
    assert len(FrameBatch(frames=[f, f])) == 2


def test_event_to_dict_is_versioned_json() -> None:
    ev = Event(rule="r", kind="enter", camera_id="c", time=1.0, frame_seq=3, box=(1, 2, 3, 4))
    d = ev.to_dict()
    assert d["schema_version"] == 1 and d["type"] == "alert" and d["box"] == [1.0, 2.0, 3.0, 4.0]
