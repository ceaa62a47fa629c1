// Greedy non-maximum suppression (torchvision semantics).
//
// boxes (N, 4) float xyxy pixels, scores (N,) -> int64 (K,) indices of the
// kept boxes by decreasing score; equal scores keep input order. A box is
// dropped when its IoU with a kept, higher-scored box is > iou_threshold.
// batched_nms only lets boxes of equal idxs (N,) int64 suppress each other.
#pragma once

#include <ATen/core/Tensor.h>

namespace streamseg {

at::Tensor nms_cpu(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);
at::Tensor batched_nms_cpu(
    const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
    double iou_threshold);

}  // namespace streamseg
