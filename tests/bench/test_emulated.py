"""The emulated GPU of streamseg.bench.emulated: what it counts as ops, launches and host syncs."""

from __future__ import annotations

import pytest
import torch

from streamseg import ops
from streamseg.bench.emulated import DEVICE_TYPE, EmulationError, emulated_gpu, record_sync
from streamseg.ops import reference as ref
from streamseg.ops.transfer import to_device


def syncs_of(fn) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The syncs ``fn(device)`` makes on the emulated GPU, by kind."""
    with emulated_gpu() as (device, counts):
        with counts.paused():
            x = torch.arange(6.0, device=device)
        fn(device, x)
        return dict(counts.syncs)


@pytest.mark.parametrize(
    ("what", "fn", "kind"),
    [
        ("item", lambda d, x: x[1].item(), "sync:aten::_local_scalar_dense"),
        ("bool", lambda d, x: bool(x[0] > 1), "sync:aten::_local_scalar_dense"),
        ("int", lambda d, x: int(x.sum()), "sync:aten::_local_scalar_dense"),
        ("tolist", lambda d, x: x.tolist(), "sync:D2H"),
        ("cpu", lambda d, x: x.cpu(), "sync:D2H"),
        ("nonzero", lambda d, x: torch.nonzero(x > 2), "sync:aten::nonzero"),
        ("where", lambda d, x: torch.where(x > 2), "sync:aten::nonzero"),
        ("mask index", lambda d, x: x[x > 2], "sync:aten::index(mask)"),
        ("mask assign", lambda d, x: x.__setitem__(x > 2, 0.0), "sync:aten::index_put_(mask)"),
        ("unique", lambda d, x: torch.unique(x), "sync:aten::_unique2"),
        ("bincount", lambda d, x: torch.bincount(x.long()), "sync:aten::bincount"),
        ("host index", lambda d, x: x[torch.tensor([0, 2])], "sync:aten::index(host index)"),
        ("blocking H2D", lambda d, x: torch.ones(3).to(d), "sync:H2D"),
        ("tensor()", lambda d, x: torch.tensor([1.0, 2.0], device=d), "sync:H2D"),
        (
            "repeat_interleave",
            lambda d, x: torch.repeat_interleave(x.long()),
            "sync:aten::repeat_interleave",
        ),
    ],
)
def test_host_syncs_are_counted(what: str, fn, kind: str) -> None:  # type: ignore[no-untyped-def]
    assert syncs_of(fn).get(kind) == 1, what


@pytest.mark.parametrize(
    "fn",
    [
        lambda d, x: to_device(torch.ones(3), d),  # non-blocking (pinned on CUDA)
        lambda d, x: torch.nonzero_static(x > 2, size=3),
        lambda d, x: torch.repeat_interleave(x.long()[:3], output_size=3),
        lambda d, x: x[torch.arange(2, device=d) * 2],
        lambda d, x: torch.topk(x, 2).indices.sort().values,
        lambda d, x: x * torch.tensor(2.0),  # a host scalar is passed by value
    ],
)
def test_what_is_not_a_sync(fn) -> None:  # type: ignore[no-untyped-def]
    assert syncs_of(fn) == {}


def test_ops_launches_and_views() -> None:
    with emulated_gpu() as (device, counts):
        with counts.paused():
            x = torch.ones(4, 4, device=device)
        y = x.t()[1:]  # views: ops, no launch
        (y * 2).sum()
    assert counts.ops["aten::t"] == 1 and counts.ops["aten::slice"] == 1
    assert "aten::t" not in counts.launches and "aten::slice" not in counts.launches
    assert counts.launches["aten::mul"] == 1 and counts.launches["aten::sum"] == 1
    assert counts.totals()["syncs"] == 0


def test_device_tensors_behave_like_cuda_ones() -> None:
    with emulated_gpu() as (device, counts):
        x = torch.arange(4.0).to(device)
        assert x.device.type == DEVICE_TYPE and (x + 1).device == x.device
        with pytest.raises(TypeError, match=r"Use Tensor\.cpu"):
            x.numpy()
        with pytest.raises(RuntimeError, match="expected all tensors on"):
            x + torch.ones(4)
        y = x.clone()
        y[1:].mul_(10)  # in place through a view
        assert y.cpu().tolist() == [0.0, 10.0, 20.0, 30.0]
        record_sync("event wait")
        assert counts.syncs["sync:event wait"] == 1


def test_sync_sites_name_the_line() -> None:
    with emulated_gpu() as (device, counts):
        boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10]]).to(device, non_blocking=True)
        ref.nms(boxes, torch.tensor([0.9, 0.8]).to(device, non_blocking=True), 0.5)
    (site,) = counts.sync_sites
    assert site.startswith("sync:aten::nonzero at streamseg.ops.reference_nms:")


@pytest.mark.parametrize("interpret", [False, True])
def test_triton_ops_are_counted_and_exact(interpret: bool) -> None:
    """The Triton path: launches counted; results those of the C++ kernels."""
    g = torch.Generator().manual_seed(0)
    boxes = torch.rand(40, 2, generator=g).repeat(1, 2) * 50
    boxes[:, 2:] += torch.rand(40, 2, generator=g) * 20 + 1
    scores = torch.rand(40, generator=g)
    with emulated_gpu(interpret=interpret) as (device, counts):
        kept = ops.nms(boxes.to(device), scores.to(device), 0.5).cpu()
    assert kept.tolist() == ref.nms(boxes, scores, 0.5).tolist()
    assert counts.launches["triton:_suppression_kernel"] == 1
    assert counts.launches["triton:_scan_kernel"] == 1
    assert counts.syncs["sync:aten::index(mask)"] == 1  # the nonzero of the keep flags


def test_nothing_is_counted_outside_and_the_interpreter_is_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with emulated_gpu() as (device, counts), counts.paused():
        torch.ones(3, device=device).sum()
    assert counts.totals() == {"ops": 0, "launches": 0, "triton_launches": 0, "syncs": 0}
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(EmulationError, match="TRITON_INTERPRET=1"), emulated_gpu():
        pass


def test_a_sync_serving_code_reports_is_counted_and_nothing_outside() -> None:
    """Serving code reports its waits through streamseg.ops.syncs, which knows no benchmark."""
    from streamseg.ops.syncs import record_sync as report

    report("event wait")  # no emulation yet in this call: nothing to count, no error
    with emulated_gpu() as (_, counts):
        report("event wait")
    assert counts.syncs == {"sync:event wait": 1}
    # The site is the caller's (here no streamseg frame), never the reporting module.
    assert list(counts.sync_sites) == ["sync:event wait at ?"]
    report("event wait")
    assert counts.syncs == {"sync:event wait": 1}


def test_the_emulated_device_is_a_gpu_only_when_passed_as_a_device() -> None:
    from streamseg.ops._native import is_gpu_type
    from streamseg.segment.backends import BackendError
    from streamseg.segment.segmenter import resolve_device

    with emulated_gpu() as (device, _):
        assert resolve_device(device, "eager") == device
        with pytest.raises(BackendError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
            resolve_device(str(device), "eager")  # a name, as pipeline.yaml gives one
    assert is_gpu_type(DEVICE_TYPE) and is_gpu_type("cuda")
    assert not any(is_gpu_type(t) for t in ("cpu", "meta", "privateuseone"))
    assert resolve_device(torch.device("cpu"), "eager") == torch.device("cpu")
