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

// The overlapping pairs of a (N, 4) and b (M, 4) float64 xyxy boxes:
// (rows int64 (P,), cols int64 (P,), iou float64 (P,)), ordered by row,
// then column; a pair overlaps when its intersection has positive width and
// height (a box with a NaN edge overlaps nothing). The IoU is the same float operations as numpy's
// inter / max(area_a + area_b - inter, 1e-12). Boxes of b are swept in
// order of left edge, so the cost follows the nearby pairs, not N * M.
std::tuple<at::Tensor, at::Tensor, at::Tensor> box_overlap_pairs_cpu(
    const at::Tensor& a, const at::Tensor& b);

}  // namespace streamseg
