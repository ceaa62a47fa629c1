"""``STREAMSEG_OPS`` with a GPU kernel that cannot launch: what the warm-up does.

Run as a script in a process without ``TRITON_INTERPRET``::

    STREAMSEG_OPS=auto|native python -m tests.ops.triton_fallback

Triton's active driver is a recording driver (``tests/ops/triton_launch.py``)
for an sm_90 device with 256 bytes of shared memory: the kernels that need
more (NMS's IoU mask and scan, RLE's boundaries) really fail to launch, with
Triton's own ``OutOfResources``, the others launch (recorded, not run). The
script runs ``streamseg.ops.triton.warm_up`` as a GPU start-up does, then
NMS twice, and prints one JSON object: the ops on the reference, the
warnings logged, NMS's answers against the reference, or the error.
"""

from __future__ import annotations

import json
import logging
import sys

import torch
from triton.runtime import driver

from streamseg.ops import _launch, _mode, reference
from streamseg.ops import triton as gpu_kernels
from tests.ops.triton_launch import RecordingDriver


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main() -> int:
    launches: list[dict[str, object]] = []
    driver.set_active(RecordingDriver(90, launches, max_shared_mem=256))
    warnings = _Warnings()
    logging.getLogger("streamseg.ops").addHandler(warnings)
    out: dict[str, object] = {"mode": _mode.mode()}
    try:
        gpu_kernels.warm_up(torch.device("cpu"), (torch.float32, torch.bfloat16))
        out["launched"] = sorted({str(launch["kernel"]) for launch in launches})
        boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
        scores = torch.tensor([0.9, 0.8, 0.7])
        answers = [torch.ops.streamseg_triton.nms(boxes, scores, 0.5).tolist() for _ in range(2)]
        out["nms"] = answers
        out["nms_reference"] = reference.nms(boxes, scores, 0.5).tolist()
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["reference_ops"] = _launch.reference_ops()
    out["warnings"] = warnings.messages
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
