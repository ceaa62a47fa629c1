"""Launch every Triton kernel the way a GPU run does, up to the driver call, without a GPU.

Run as a script in a process without ``TRITON_INTERPRET``::

    python -m tests.ops.triton_launch [--arch 80,90] [--cases MODULE:ATTR]

Triton is given a driver of our own (:class:`RecordingDriver`, made active
with ``triton.runtime.driver.set_active``) that reports a CUDA ``GPUTarget``
and, where the real driver would load the cubin and launch it, records the
launch. Everything before that is Triton's own code, unchanged:
``JITFunction.run`` builds its generated binder (the one that binds and
specialises the arguments), packs the options, compiles for the target
(``ptxas`` comes with Triton's wheel) and checks the kernel's shared
memory and threads against the device's limits. The op wrappers of
:mod:`streamseg.ops.triton` are called with CPU tensors of the dtypes and
shapes that :mod:`streamseg.ops` sends to them on a GPU (the interpreter
tests run their semantics; this runs their launch).

Prints one JSON line per (arch, case) and one with the names a kernel
parameter must not take (:func:`reserved_names`); exits 1 if any case
failed or any kernel parameter takes such a name.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime import driver
from triton.runtime.jit import JITFunction, create_function_from_signature

Case = tuple[str, Callable[[], object]]

# What the recorded launches are checked against (CUDA's limits for a grid
# and a block) and what the driver would report for the devices.
MAX_GRID = (2**31 - 1, 65535, 65535)
DEVICES = {
    80: {"max_shared_mem": 166912, "multiprocessor_count": 108},  # A100
    90: {"max_shared_mem": 232448, "multiprocessor_count": 132},  # H100 / H200
}
MAX_THREADS = 1024


class _Utils:
    """The driver's device queries and binary loader: a device's limits, no loading."""

    def __init__(self, arch: int, max_shared_mem: int | None) -> None:
        self.properties = {**DEVICES[arch], "max_num_regs": 65536, "warpSize": 32}
        if max_shared_mem is not None:
            self.properties["max_shared_mem"] = max_shared_mem

    def get_device_properties(self, device: int) -> dict[str, int]:
        return dict(self.properties)

    def load_binary(self, name: str, binary: bytes, shared: int, device: int) -> tuple[Any, ...]:
        # (module, function, registers, spills, max threads per block)
        return None, name, 0, 0, MAX_THREADS


class RecordingDriver(DriverBase):
    """A CUDA device of compute capability ``arch`` whose launches are recorded, not run.

    Each arch is its own device number (the arch itself), so that Triton
    keeps a separate binder and kernel cache for each. ``max_shared_mem``
    (bytes) makes a device with less shared memory than the real one.
    """

    def __init__(
        self, arch: int, launches: list[dict[str, Any]], max_shared_mem: int | None = None
    ) -> None:
        super().__init__()
        self.arch = arch
        self.utils = _Utils(arch, max_shared_mem)
        self.launches = launches
        recorder = self

        class Launcher:
            def __init__(self, src: Any, metadata: Any) -> None:
                self.signature = dict(src.signature)
                self.name = metadata.name
                self.num_warps = metadata.num_warps
                self.shared = metadata.shared

            def __call__(self, gx: int, gy: int, gz: int, stream: Any, fn: Any, *rest: Any) -> None:
                recorder.record(self, (gx, gy, gz), rest)

        self.launcher_cls = Launcher

    @staticmethod
    def is_active() -> bool:
        return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", self.arch, 32)

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_benchmarker(self) -> Any:
        raise NotImplementedError("nothing runs on a recording driver")

    def get_current_device(self) -> int:
        return self.arch

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def record(self, launcher: Any, grid: tuple[int, int, int], rest: tuple[Any, ...]) -> None:
        """Check a launch as the driver would (grid limits, a pointer per pointer
        argument) and keep it. ``rest`` ends with the kernel's arguments."""
        for size, limit in zip(grid, MAX_GRID, strict=True):
            if not 1 <= size <= limit:
                raise ValueError(f"{launcher.name}: grid {grid} outside CUDA's limits {MAX_GRID}")
        args = rest[-len(launcher.signature) :]
        for (name, kind), value in zip(launcher.signature.items(), args, strict=True):
            if str(kind).startswith("*") and not hasattr(value, "data_ptr"):
                raise TypeError(f"{launcher.name}: pointer argument {name} got {type(value)}")
        self.launches.append(
            {
                "kernel": launcher.name,
                "grid": list(grid),
                "num_warps": launcher.num_warps,
                "shared": launcher.shared,
                "signature": {k: str(v) for k, v in launcher.signature.items()},
            }
        )


# --------------------------------------------------------------------------- names


def _probe(probe_ptr, probe_n, PROBE_BLOCK: tl.constexpr):  # pragma: no cover
    pass


def reserved_names() -> dict[str, list[str]]:
    """Names a kernel parameter must not take, read from the installed Triton.

    * ``binder``: what the generated binder (``create_function_from_signature``)
      defines or reads besides the kernel's parameters (its ``params`` dict,
      its ``specialization`` list, ``**options``, ``backend``, ...), read from
      the code of a binder built for a probe kernel;
    * ``run``: ``JITFunction.run``'s own keyword parameters and the keys it
      adds to the launch's keyword arguments (they would bind to a kernel
      parameter of that name);
    * ``options``: the CUDA backend's compile options, which share the launch
      call's keyword arguments with the kernel's parameters.

    Works with or without ``TRITON_INTERPRET`` (the probe is a ``JITFunction``
    either way).
    """
    probe = JITFunction(_probe)
    backend = triton.compiler.make_backend(GPUTarget("cuda", 90, 32))
    binder = create_function_from_signature(probe.signature, probe.params, backend)
    code = binder.__code__
    own = set(probe.arg_names)
    binder_names = (set(code.co_varnames) | set(code.co_names) | set(binder.__globals__)) - own
    run = inspect.signature(JITFunction.run).parameters
    run_names = {n for n, p in run.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    run_names |= set(re.findall(r"kwargs\[\"(\w+)\"\]", inspect.getsource(JITFunction.run)))
    options = {f.name for f in fields(backend.parse_options({}))}
    return {
        "binder": sorted(n for n in binder_names if not n.startswith("__")),
        "run": sorted(run_names),
        "options": sorted(options),
    }


def kernel_parameters(paths: Iterable[Path]) -> dict[str, list[str]]:
    """``file:function`` -> parameter names of every ``@triton.jit`` function in ``paths``
    (read from the source, nothing imported)."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d).split("(")[0] in ("triton.jit", "jit") for d in node.decorator_list
            ):
                args = node.args
                names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                found[f"{path.name}:{node.name}"] = names
    return found


def shadowed(paths: Iterable[Path]) -> list[str]:
    """``file:kernel: parameter (group)`` for each kernel parameter that takes a reserved name."""
    reserved = reserved_names()
    return [
        f"{kernel}: {param} ({group})"
        for kernel, params in sorted(kernel_parameters(paths).items())
        for param in params
        for group, names in reserved.items()
        if param in names
    ]


def kernels(modules: Iterable[Any]) -> dict[str, JITFunction]:
    """Every ``@triton.jit`` function defined in ``modules``, by qualified name."""
    found = {}
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, JITFunction) and value.fn.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


# --------------------------------------------------------------------------- cases


def _boxes(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    xy = torch.rand(n, 2, generator=g) * 500
    return torch.cat((xy, xy + 1 + torch.rand(n, 2, generator=g) * 200), 1).to(dtype)


def _nms(n: int, dtype: torch.dtype, classes: int | None) -> Callable[[], object]:
    ops = torch.ops.streamseg_triton
    boxes, scores = _boxes(n, dtype), torch.rand(n, dtype=dtype)
    if classes is None:
        return lambda: ops.nms(boxes, scores, 0.5)
    idxs = torch.randint(0, classes, (n,))
    return lambda: ops.batched_nms(boxes, scores, idxs, 0.5)


def _roi_align(dtype: torch.dtype, batch: int, sampling_ratio: int, aligned: bool) -> Case:
    ops = torch.ops.streamseg_triton

    def run() -> object:
        x = torch.randn(batch, 256, 25, 34, dtype=dtype, requires_grad=True)
        rois = torch.cat((torch.zeros(37, 1), _boxes(37) / 8), 1).to(dtype)
        out = ops.roi_align(x, rois, 0.25, 7, 7, sampling_ratio, aligned)
        out.backward(torch.ones_like(out))  # roi_align_backward, as training runs it
        return x.grad

    name = (
        f"roi_align_{str(dtype)[6:]}_b{batch}_sr{sampling_ratio}_{'aligned' if aligned else 'v1'}"
    )
    return name, run


def _paste(dtype: torch.dtype, binary: bool) -> Callable[[], object]:
    ops = torch.ops.streamseg_triton
    masks = torch.rand(5, 28, 28).to(dtype)
    boxes = _boxes(5) * 2
    if binary:
        return lambda: ops.paste_masks_binary(masks, boxes, 1080, 1920, 1, 0.5)
    return lambda: ops.paste_masks(masks, boxes, 1080, 1920, 1)


def _decode(dtype: torch.dtype, classes: int) -> Callable[[], object]:
    ops = torch.ops.streamseg_triton
    deltas, boxes = torch.randn(100, 4 * classes, dtype=dtype), _boxes(100)
    return lambda: ops.decode_boxes(deltas, boxes, 10.0, 10.0, 5.0, 5.0, 4.135)


def _rle(dtype: torch.dtype) -> Callable[[], object]:
    from streamseg.ops.triton import rle

    masks = (torch.rand(3, 270, 480) > 0.5).to(dtype)
    return lambda: rle.masks_to_rle(masks)


def cases() -> list[Case]:
    """The launches :mod:`streamseg.ops` makes on a GPU: each op with each dtype it
    sends to Triton (``_FLOAT`` / ``_ANY_FLOAT`` / bool and uint8 masks), and the
    integer arguments Triton specialises differently (1, multiples of 16, others)."""
    f32, f64, f16, bf16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
    out: list[Case] = []
    for dtype in (f32, f64):
        tag = str(dtype)[6:]
        out += [
            (f"nms_{tag}_n10", _nms(10, dtype, None)),
            (f"nms_{tag}_n1000", _nms(1000, dtype, None)),
            (f"batched_nms_{tag}_n130", _nms(130, dtype, 80)),
            (f"decode_boxes_{tag}_k1", _decode(dtype, 1)),
            (f"decode_boxes_{tag}_k91", _decode(dtype, 91)),
        ]
    out += [_roi_align(dtype, 1, 0, False) for dtype in (f32, f64, f16, bf16)]
    out += [_roi_align(f32, 2, 2, True), _roi_align(bf16, 2, 1, True)]
    for dtype in (f32, f64, f16, bf16):
        tag = str(dtype)[6:]
        out += [(f"paste_masks_{tag}", _paste(dtype, False))]
        out += [(f"paste_masks_binary_{tag}", _paste(dtype, True))]
    out += [("masks_to_rle_bool", _rle(torch.bool)), ("masks_to_rle_uint8", _rle(torch.uint8))]
    return out


# --------------------------------------------------------------------------- main


def _compiled(modules: Iterable[Any], arch: int) -> list[dict[str, Any]]:
    """What was compiled for ``arch``: per kernel specialisation, whether its PTX
    multiplies-and-adds in one instruction (``fma``) and the cubin's size."""
    rows = []
    for qualname, fn in sorted(kernels(modules).items()):
        if arch not in fn.device_caches:
            continue
        for kernel in fn.device_caches[arch][0].values():
            ptx = kernel.asm["ptx"]
            rows.append(
                {
                    "kernel": qualname,
                    "fma": "fma.rn.f" in ptx,
                    "cubin_bytes": len(kernel.asm["cubin"]),
                }
            )
    return rows


def _launch(
    name: str, case: Callable[[], object], arch: int, launches: list[Any]
) -> dict[str, Any]:
    """Run one case; its JSON row (``ok``, the launches it made or the error)."""
    del launches[:]
    start = time.perf_counter()
    row: dict[str, Any] = {"case": name, "arch": arch}
    try:
        case()
        row.update(ok=bool(launches), launches=list(launches))
        if not launches:
            row["error"] = "the case launched no kernel"
    except Exception as exc:  # every case is reported, then the run fails
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


def run_cases(archs: list[int], selected: list[Case], modules: list[Any]) -> int:
    """Launch every case for every arch; print a JSON line each; the number that failed."""
    failed = 0
    for arch in archs:
        launches: list[dict[str, Any]] = []
        # Left active when done: Triton's reset looks for a real driver, and there is none.
        driver.set_active(RecordingDriver(arch, launches))
        for name, case in selected:
            row = _launch(name, case, arch, launches)
            failed += not row["ok"]
            print(json.dumps(row), flush=True)
        print(json.dumps({"arch": arch, "compiled": _compiled(modules, arch)}), flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", default="80,90", help="compute capabilities, e.g. 80,90")
    parser.add_argument(
        "--cases",
        default="tests.ops.triton_launch:cases",
        help="MODULE:ATTR, a function returning [(name, callable)], and the module "
        "whose kernels are checked for reserved parameter names",
    )
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter has no launch path", file=sys.stderr)
        return 2
    from streamseg.ops import triton as gpu_kernels

    gpu_kernels.load()
    modules = [
        importlib.import_module(f"streamseg.ops.triton.{m}") for m in gpu_kernels.KERNEL_MODULES
    ]
    module_name, attr = args.cases.split(":")
    case_module = importlib.import_module(module_name)
    modules.append(case_module)
    bad = shadowed(Path(m.__file__) for m in modules)
    print(json.dumps({"triton": triton.__version__, "reserved": reserved_names(), "shadowed": bad}))
    failed = run_cases(
        [int(a) for a in args.arch.split(",")], getattr(case_module, attr)(), modules
    )
    return 1 if failed or bad else 0


if __name__ == "__main__":
    sys.exit(main())
