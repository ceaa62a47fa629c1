"""One preprocessing path: ``eval`` and ``label`` feed the model what ``serve`` feeds it.

The same frames go through the Segmenter and through the evaluation path
(:func:`streamseg.train.evaluate.predict`, which ``eval``, ``label`` and the
trainer's evaluation use) into one model; a forward pre-hook records the
model's input each time. Both must be identical to the last bit, at the
common camera sizes, with the small model's own resize (shrinking) and with
torchvision's 800/1333 (a 480x640 camera is upscaled to 800x1066).
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from streamseg.segment import Segmenter
from streamseg.segment.preprocess import resized_size
from streamseg.synthetic.scene import SyntheticScene
from streamseg.train.evaluate import predict
from streamseg.types import Frame, FrameBatch

SIZES = [(480, 640), (720, 1280), (1080, 1920)]


def _frames(height: int, width: int) -> list[Tensor]:
    scene = SyntheticScene(seed=7, height=height, width=width, num_objects=3)
    return [scene.frame(i).image for i in (0, 5)]


def _record(model: nn.Module) -> tuple[list[tuple[Tensor, list[tuple[int, int]]]], RemovableHandle]:
    seen: list[tuple[Tensor, list[tuple[int, int]]]] = []

    def hook(_module: nn.Module, args: tuple[object, ...]) -> None:
        images, sizes = args[0], args[1]
        assert isinstance(images, Tensor) and isinstance(sizes, list)
        seen.append((images.detach().clone(), list(sizes)))

    return seen, model.register_forward_pre_hook(hook)


@pytest.mark.parametrize("resize", [{}, {"min_size": 800, "max_size": 1333}], ids=["own", "800"])
@pytest.mark.parametrize(("height", "width"), SIZES, ids=["480x640", "720p", "1080p"])
def test_segmenter_and_evaluation_give_the_model_identical_input(
    height: int, width: int, resize: dict[str, int]
) -> None:
    torch.manual_seed(0)
    seg = Segmenter(arch="maskrcnn_small", **resize)
    frames = _frames(height, width)
    seen, handle = _record(seg.model)
    try:
        batch = FrameBatch(tuple(Frame("cam", i, 0.0, 0.0, im) for i, im in enumerate(frames)))
        served = seg.segment(batch)
        evaluated = list(predict(seg.model, enumerate(frames), batch_size=len(frames)))
    finally:
        handle.remove()
    assert len(seen) == 2
    (serve_x, serve_sizes), (eval_x, eval_sizes) = seen
    spec = seg.input_spec
    want = resized_size(height, width, spec.min_size, spec.max_size)
    assert want != (height, width) and serve_sizes == eval_sizes == [want] * len(frames)
    assert serve_x.dtype == eval_x.dtype == torch.float32
    assert torch.equal(serve_x, eval_x)
    # Same input, same model: the same instances.
    for s, (_, e) in zip(served, evaluated, strict=True):
        assert torch.equal(s.boxes, e.boxes) and torch.equal(s.labels, e.labels)
