"""Compile every Triton kernel for real GPUs (sm_80, sm_90) without one.

Run as a script (``python -m tests.ops.triton_compile [ARCH ...]``) in a process without
``TRITON_INTERPRET``: the interpreter accepts code that the compiler
rejects (types, constexpr rules), so this catches what it cannot. Triton's
wheel carries ``ptxas``; no GPU or CUDA toolkit is needed. Prints one JSON
line per kernel. The launch wrappers pass these signatures (pointer element
types, scalar types, constexprs) for float32 inputs; ``sampling_ratio`` is
also compiled as 1, which Triton specialises to a constant.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from streamseg.ops.triton import box_coder, nms, paste_masks, rle, roi_align

ROI = {
    "input": "*fp32",
    "rois": "*fp32",
    "scale": "*fp32",
    "batch_size": "i32",
    "channels": "i32",
    "height": "i32",
    "width": "i32",
    "ph": "i32",
    "pw": "i32",
    "sampling_ratio": "i32",
    "ALIGNED": "constexpr",
    "BLOCK": "constexpr",
}
ROI_BACK = {**{("grad" if k == "input" else k): v for k, v in ROI.items()}, "grad_input": "*fp32"}


def cases() -> list[tuple[str, Any, dict[str, str], dict[str, Any], dict[str, Any]]]:
    roi_c = {"ALIGNED": True, "BLOCK": roi_align.BLOCK}
    paste = {
        "masks": "*fp32",
        "boxes": "*i32",
        "out": "*fp32",
        "thr": "*fp32",
        "m": "i32",
        "pad": "i32",
        "height": "i32",
        "width": "i32",
        "BINARY": "constexpr",
        "TILE_Y": "constexpr",
        "TILE_X": "constexpr",
    }
    tiles = {"TILE_Y": paste_masks.TILE_Y, "TILE_X": paste_masks.TILE_X}
    return [
        (
            "nms_suppression",
            nms._suppression_kernel,
            {
                "boxes": "*fp32",
                "cls": "*i64",
                "n": "i32",
                "words": "i32",
                "thr": "*fp32",
                "mask": "*i64",
                "HAS_CLS": "constexpr",
                "WORD": "constexpr",
            },
            {"HAS_CLS": True, "WORD": nms.WORD},
            {"enable_fp_fusion": False},
        ),
        (
            "nms_scan",
            nms._scan_kernel,
            {
                "mask": "*i64",
                "keep": "*i1",
                "n": "i32",
                "words": "i32",
                "BLOCK": "constexpr",
                "WORD": "constexpr",
            },
            {"BLOCK": 128, "WORD": nms.WORD},
            {},
        ),
        (
            "roi_align_forward",
            roi_align._forward_kernel,
            {
                "input": "*fp32",
                "rois": "*fp32",
                "out": "*fp32",
                **{k: v for k, v in ROI.items() if k not in ("input", "rois")},
            },
            roi_c,
            {},
        ),
        (
            "roi_align_forward_sr1",
            roi_align._forward_kernel,
            {
                "input": "*bf16",
                "rois": "*fp32",
                "out": "*bf16",
                **{
                    k: ("constexpr" if k == "sampling_ratio" else v)
                    for k, v in ROI.items()
                    if k not in ("input", "rois")
                },
            },
            {**roi_c, "sampling_ratio": 1},
            {},
        ),
        (
            "roi_align_backward",
            roi_align._backward_kernel,
            {
                "grad": "*fp32",
                "rois": "*fp32",
                "grad_input": "*fp32",
                **{k: v for k, v in ROI_BACK.items() if k not in ("grad", "rois", "grad_input")},
            },
            roi_c,
            {},
        ),
        ("paste_masks", paste_masks._paste_kernel, paste, {"BINARY": False, **tiles}, {}),
        (
            "paste_masks_binary",
            paste_masks._paste_kernel,
            {**paste, "out": "*i1"},
            {"BINARY": True, **tiles},
            {},
        ),
        (
            "rle_boundaries",
            rle._boundary_kernel,
            {
                "masks": "*u8",
                "flags": "*i1",
                "height": "i32",
                "width": "i32",
                "TILE_Y": "constexpr",
                "TILE_X": "constexpr",
            },
            {"TILE_Y": rle.TILE_Y, "TILE_X": rle.TILE_X},
            {},
        ),
        (
            "decode_boxes",
            box_coder._decode_kernel,
            {
                "deltas": "*fp32",
                "boxes": "*fp32",
                "params": "*fp32",
                "out": "*fp32",
                "total": "i32",
                "classes": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": box_coder.BLOCK},
            {},
        ),
    ]


def main() -> int:
    archs = [int(a) for a in sys.argv[1:]] or [80, 90]
    failed = 0
    for arch in archs:
        for name, fn, signature, constexprs, options in cases():
            start = time.perf_counter()
            try:
                kernel = triton.compile(
                    ASTSource(fn, signature=signature, constexprs=constexprs),
                    target=GPUTarget("cuda", arch, 32),
                    options=options,
                )
                ptx = kernel.asm["ptx"]
                row = {
                    "kernel": name,
                    "arch": arch,
                    "ok": True,
                    "fma": "fma.rn.f" in ptx,
                    "cubin_bytes": len(kernel.asm["cubin"]),
                }
            except Exception as exc:  # report every kernel, then fail
                failed += 1
                row = {"kernel": name, "arch": arch, "ok": False, "error": str(exc)[:2000]}
            row["seconds"] = round(time.perf_counter() - start, 2)
            print(json.dumps(row), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
