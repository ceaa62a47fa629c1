// CPU mask paste, parallel over masks. Each task writes its whole output
// plane exactly once (zeros outside the box), so the frame-sized output is
// never cleared separately.
#include "paste_masks.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

namespace streamseg {
namespace {

template <typename scalar_t>
void paste_kernel(
    const at::Tensor& masks, const int64_t* int_boxes, at::Tensor& out, int64_t padding) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t n = masks.size(0), m = masks.size(1), mp = m + 2 * padding;
  const int64_t h = out.size(1), w = out.size(2);
  const scalar_t* ms = masks.const_data_ptr<scalar_t>();
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<acc_t> padded(static_cast<size_t>(mp * mp));
    std::vector<ResizeTap<acc_t>> xs;
    for (int64_t k = lo; k < hi; ++k) {
      scalar_t* plane = o + k * h * w;
      const int64_t* ib = int_boxes + 4 * k;
      const int64_t fx0 = std::max<int64_t>(ib[0], 0), fy0 = std::max<int64_t>(ib[1], 0);
      const int64_t fx1 = std::min<int64_t>(ib[2] + 1, w), fy1 = std::min<int64_t>(ib[3] + 1, h);
      if (fx1 <= fx0 || fy1 <= fy0) {
        std::fill(plane, plane + h * w, scalar_t(0));
        continue;
      }
      const int64_t out_w = std::max<int64_t>(ib[2] - ib[0] + 1, 1);
      const int64_t out_h = std::max<int64_t>(ib[3] - ib[1] + 1, 1);
      std::fill(padded.begin(), padded.end(), acc_t(0));
      const scalar_t* src = ms + k * m * m;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j)
          padded[(i + padding) * mp + j + padding] = static_cast<acc_t>(src[i * m + j]);
      xs.resize(static_cast<size_t>(fx1 - fx0));
      for (int64_t x = fx0; x < fx1; ++x) xs[x - fx0] = resize_tap<acc_t>(x - ib[0], mp, out_w);
      std::fill(plane, plane + fy0 * w, scalar_t(0));
      for (int64_t y = fy0; y < fy1; ++y) {
        scalar_t* row = plane + y * w;
        const ResizeTap<acc_t> ty = resize_tap<acc_t>(y - ib[1], mp, out_h);
        const acc_t* r0 = padded.data() + ty.i0 * mp;
        const acc_t* r1 = padded.data() + ty.i1 * mp;
        std::fill(row, row + fx0, scalar_t(0));
        for (int64_t x = fx0; x < fx1; ++x) {
          const ResizeTap<acc_t>& tx = xs[x - fx0];
          const acc_t top = r0[tx.i0] * tx.w0 + r0[tx.i1] * tx.w1;
          const acc_t bottom = r1[tx.i0] * tx.w0 + r1[tx.i1] * tx.w1;
          row[x] = static_cast<scalar_t>(top * ty.w0 + bottom * ty.w1);
        }
        std::fill(row + fx1, row + w, scalar_t(0));
      }
      std::fill(plane + fy1 * w, plane + h * w, scalar_t(0));
    }
  });
}

}  // namespace

std::vector<int64_t> paste_boxes_cpu(const at::Tensor& boxes_in, int64_t mask_size, int64_t padding) {
  const at::Tensor boxes = boxes_in.contiguous();
  const int64_t n = boxes.size(0);
  std::vector<int64_t> out(static_cast<size_t>(4 * n));
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, boxes.scalar_type(), "streamseg_paste_boxes", [&] {
        const scalar_t* b = boxes.const_data_ptr<scalar_t>();
        const double scale = static_cast<double>(mask_size + 2 * padding) / mask_size;
        for (int64_t k = 0; k < n; ++k) {
          // In the boxes' own dtype, as the reference computes it.
          if (!paste_box<scalar_t>(b + 4 * k, static_cast<scalar_t>(scale), &out[4 * k])) {
            const int64_t none[4] = {0, 0, -1, -1};  // pastes nothing
            std::copy(none, none + 4, &out[4 * k]);
          }
        }
      });
  return out;
}

at::Tensor paste_masks_cpu(
    const at::Tensor& masks_in, const at::Tensor& boxes_in, int64_t height, int64_t width,
    int64_t padding) {
  TORCH_CHECK(
      masks_in.dim() == 3 && masks_in.size(1) == masks_in.size(2),
      "masks must be (N, M, M), got ", masks_in.sizes());
  TORCH_CHECK(
      boxes_in.dim() == 2 && boxes_in.size(1) == 4 && boxes_in.size(0) == masks_in.size(0),
      "boxes must be (N, 4) with N masks, got ", boxes_in.sizes());
  TORCH_CHECK(padding >= 0 && height >= 0 && width >= 0, "padding and frame size must be >= 0");
  at::Tensor out = at::empty({masks_in.size(0), height, width}, masks_in.options());
  if (out.numel() == 0) return out;
  TORCH_CHECK(masks_in.size(1) > 0, "masks must not be empty");
  const at::Tensor masks = masks_in.contiguous();
  const std::vector<int64_t> int_boxes = paste_boxes_cpu(boxes_in, masks.size(1), padding);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, masks.scalar_type(), "streamseg_paste_masks", [&] {
        paste_kernel<scalar_t>(masks, int_boxes.data(), out, padding);
      });
  return out;
}

}  // namespace streamseg
