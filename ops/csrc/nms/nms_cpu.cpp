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
#include <cmath>
#include <cstdint>
#include <numeric>
#include <tuple>
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

namespace {

bool has_nan(const double* box) {
  return std::isnan(box[0]) || std::isnan(box[1]) || std::isnan(box[2]) || std::isnan(box[3]);
}

}  // namespace

namespace {

// The pairs of box_overlap_pairs_cpu from raw float64 xyxy arrays, into rows, cols, ious.
void overlap_pairs_into(const double* pa, int64_t n, const double* pb, int64_t m,
                        std::vector<int64_t>& rows, std::vector<int64_t>& cols,
                        std::vector<double>& ious) {
  // b by left edge; the widest b bounds how far left an overlapping one starts.
  // Boxes with NaN or infinite edges fall back to testing every pair.
  bool finite = true;
  double widest = 0.0;
  for (int64_t j = 0; j < m; ++j) {
    const double* q = pb + 4 * j;
    finite = finite && std::isfinite(q[0]) && std::isfinite(q[1]) && std::isfinite(q[2]) &&
             std::isfinite(q[3]);
    widest = std::max(widest, q[2] - q[0]);
  }
  std::vector<int64_t> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> left(static_cast<size_t>(m));
  if (finite) {
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return pb[4 * i] < pb[4 * j]; });
    for (int64_t k = 0; k < m; ++k) left[k] = pb[4 * order[k]];
  }
  rows.clear();
  cols.clear();
  ious.clear();
  std::vector<int64_t> row_cols;
  for (int64_t i = 0; i < n; ++i) {
    const double* p = pa + 4 * i;
    int64_t lo = 0, hi = m;
    if (finite && std::isfinite(p[0]) && std::isfinite(p[2])) {
      // A b box overlaps only if its left edge is in (p.x1 - widest, p.x2);
      // a pixel of slack on the left for rounding (candidates are tested).
      lo = std::upper_bound(left.begin(), left.end(), p[0] - widest - 1.0) - left.begin();
      hi = std::lower_bound(left.begin(), left.end(), p[2]) - left.begin();
    }
    row_cols.clear();
    // A box with a NaN edge overlaps nothing (numpy's min and max pass NaN on).
    if (has_nan(p)) continue;
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t j = finite ? order[k] : k;
      const double* q = pb + 4 * j;
      if (!finite && has_nan(q)) continue;
      const double iw = std::min(p[2], q[2]) - std::max(p[0], q[0]);
      const double ih = std::min(p[3], q[3]) - std::max(p[1], q[1]);
      if (iw > 0 && ih > 0) row_cols.push_back(j);
    }
    std::sort(row_cols.begin(), row_cols.end());
    const double area_a = (p[2] - p[0]) * (p[3] - p[1]);
    for (int64_t j : row_cols) {
      const double* q = pb + 4 * j;
      const double iw = std::min(p[2], q[2]) - std::max(p[0], q[0]);
      const double ih = std::min(p[3], q[3]) - std::max(p[1], q[1]);
      const double inter = iw * ih;
      const double area_b = (q[2] - q[0]) * (q[3] - q[1]);
      const double uni = area_a + area_b - inter;
      rows.push_back(i);
      cols.push_back(j);
      ious.push_back(inter / (uni < 1e-12 ? 1e-12 : uni));
    }
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> box_overlap_pairs_cpu(
    const at::Tensor& a_in, const at::Tensor& b_in) {
  TORCH_CHECK(a_in.dim() == 2 && a_in.size(1) == 4, "a must be (N, 4), got ", a_in.sizes());
  TORCH_CHECK(b_in.dim() == 2 && b_in.size(1) == 4, "b must be (M, 4), got ", b_in.sizes());
  TORCH_CHECK(
      a_in.scalar_type() == at::kDouble && b_in.scalar_type() == at::kDouble,
      "boxes must be float64");
  const at::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t n = a.size(0), m = b.size(0);
  std::vector<int64_t> rows, cols;
  std::vector<double> ious;
  overlap_pairs_into(
      a.const_data_ptr<double>(), n, b.const_data_ptr<double>(), m, rows, cols, ious);
  const int64_t p = static_cast<int64_t>(rows.size());
  at::Tensor out_rows = at::empty({p}, at::TensorOptions().dtype(at::kLong));
  at::Tensor out_cols = at::empty({p}, at::TensorOptions().dtype(at::kLong));
  at::Tensor out_iou = at::empty({p}, at::TensorOptions().dtype(at::kDouble));
  std::copy(rows.begin(), rows.end(), out_rows.mutable_data_ptr<int64_t>());
  std::copy(cols.begin(), cols.end(), out_cols.mutable_data_ptr<int64_t>());
  std::copy(ious.begin(), ious.end(), out_iou.mutable_data_ptr<double>());
  return {out_rows, out_cols, out_iou};
}

}  // namespace streamseg

// box_overlap_pairs for a caller that holds the GIL and keeps it (Python's
// ctypes.PyDLL): a torch op gives the GIL up for the length of the call, and
// a busy thread of the same process that takes it meanwhile keeps it for a
// whole switch interval (5 ms). Writes min(P, capacity) pairs into rows,
// cols and iou and returns P, the number of pairs: a caller whose buffers
// were too small calls again with larger ones.
extern "C" __attribute__((visibility("default"))) int64_t streamseg_box_overlap_pairs_into(
    const double* a, int64_t n, const double* b, int64_t m, int64_t* rows, int64_t* cols,
    double* iou, int64_t capacity) {
  thread_local std::vector<int64_t> r, c;
  thread_local std::vector<double> v;
  streamseg::overlap_pairs_into(a, n, b, m, r, c, v);
  const int64_t p = static_cast<int64_t>(r.size());
  const int64_t k = std::min(p, capacity);
  std::copy(r.begin(), r.begin() + k, rows);
  std::copy(c.begin(), c.begin() + k, cols);
  std::copy(v.begin(), v.begin() + k, iou);
  return p;
}
