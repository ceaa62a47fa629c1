// CPU NMS: boxes are sorted once by score, grouped by category, and each
// group runs the greedy scan in parallel. The inner loop is branch-free over
// structure-of-arrays coordinates so the compiler vectorises it.
#include "nms.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sort.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace streamseg {
namespace {

void check_inputs(const at::Tensor& boxes, const at::Tensor& scores) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, "boxes must be (N, 4), got ", boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0), "scores must be (N,)");
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type(), "boxes and scores must share a dtype");
}

// Greedy scan over one group of boxes, given in decreasing score order as
// positions into the sorted arrays; sets keep[pos] for the survivors.
template <typename T>
void greedy_group(const T* sorted_boxes, const int64_t* pos, int64_t n, T thr, uint8_t* keep) {
  std::vector<T> x1(n), y1(n), x2(n), y2(n), area(n);
  for (int64_t i = 0; i < n; ++i) {
    const T* b = sorted_boxes + 4 * pos[i];
    x1[i] = b[0];
    y1[i] = b[1];
    x2[i] = b[2];
    y2[i] = b[3];
    area[i] = (b[2] - b[0]) * (b[3] - b[1]);
  }
  std::vector<uint8_t> removed(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (removed[i]) continue;
    keep[pos[i]] = 1;
    const T ix1 = x1[i], iy1 = y1[i], ix2 = x2[i], iy2 = y2[i], iarea = area[i];
    uint8_t* rem = removed.data();
    // Same formula and operation order as reference.box_iou: 0/0 gives nan,
    // which never exceeds the threshold.
    for (int64_t j = i + 1; j < n; ++j) {
      const T w = std::max(std::min(ix2, x2[j]) - std::max(ix1, x1[j]), T(0));
      const T h = std::max(std::min(iy2, y2[j]) - std::max(iy1, y1[j]), T(0));
      const T inter = w * h;
      const T iou = inter / (iarea + area[j] - inter);
      rem[j] |= static_cast<uint8_t>(iou > thr);
    }
  }
}

// Sorted order (stable, decreasing score), then groups of equal category.
at::Tensor nms_impl(
    const at::Tensor& boxes_in, const at::Tensor& scores_in, const at::Tensor* idxs,
    double iou_threshold) {
  check_inputs(boxes_in, scores_in);
  const int64_t n = boxes_in.size(0);
  if (n == 0) return at::empty({0}, boxes_in.options().dtype(at::kLong));
  const at::Tensor order =
      std::get<1>(at::sort(scores_in, /*stable=*/true, /*dim=*/0, /*descending=*/true));
  // Positions (into the score order) grouped by category, score order kept.
  at::Tensor grouped;
  std::vector<int64_t> starts{0};
  if (idxs != nullptr) {
    auto [cls, perm] = at::sort(idxs->index_select(0, order), true, 0, false);
    grouped = perm.contiguous();
    cls = cls.contiguous();
    const int64_t* c = cls.const_data_ptr<int64_t>();
    for (int64_t i = 1; i < n; ++i) {
      if (c[i] != c[i - 1]) starts.push_back(i);
    }
  } else {
    grouped = at::arange(n, order.options());
  }
  starts.push_back(n);
  std::vector<uint8_t> keep(n, 0);
  AT_DISPATCH_FLOATING_TYPES(boxes_in.scalar_type(), "streamseg_nms", [&] {
    const at::Tensor sorted = boxes_in.index_select(0, order).contiguous();
    const scalar_t* sb = sorted.const_data_ptr<scalar_t>();
    const int64_t* gp = grouped.const_data_ptr<int64_t>();
    const auto thr = static_cast<scalar_t>(iou_threshold);
    const int64_t groups = static_cast<int64_t>(starts.size()) - 1;
    at::parallel_for(0, groups, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) {
        greedy_group(sb, gp + starts[g], starts[g + 1] - starts[g], thr, keep.data());
      }
    });
  });
  const int64_t* o = order.const_data_ptr<int64_t>();
  std::vector<int64_t> kept;
  for (int64_t p = 0; p < n; ++p) {
    if (keep[p]) kept.push_back(o[p]);
  }
  at::Tensor out = at::empty({static_cast<int64_t>(kept.size())}, order.options());
  std::copy(kept.begin(), kept.end(), out.mutable_data_ptr<int64_t>());
  return out;
}

}  // namespace

at::Tensor nms_cpu(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  return nms_impl(boxes.contiguous(), scores.contiguous(), nullptr, iou_threshold);
}

at::Tensor batched_nms_cpu(
    const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
    double iou_threshold) {
  TORCH_CHECK(idxs.dim() == 1 && idxs.size(0) == boxes.size(0), "idxs must be (N,)");
  const at::Tensor cls = idxs.to(at::kLong).contiguous();
  return nms_impl(boxes.contiguous(), scores.contiguous(), &cls, iou_threshold);
}

}  // namespace streamseg
